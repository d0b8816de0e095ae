internal import COpenSSL
import Glibc
import ProxyModel

/// The outcome of judging one presented chain under a `trust` policy, with the reason the log shows.
public enum TrustVerdict: Sendable, Equatable {
    case accepted(String)
    case rejected(String)
}

/// Makes AFSecurityPolicy's decision (SPEC.md "trust", steps 1–4) for a chain hookproxy received as a TLS client.
/// Pure apart from OpenSSL verification; runs on the transfer's event loop inside the handshake. Every step that checks
/// dates (the store verification of steps 1–2, the pinned-anchor verification of step 3) checks them at `clock`.
struct TrustEvaluator {
    let policy: TrustPolicy
    let host: String
    var clock = VerifyClock.now

    /// The result of verifying a chain against one store.
    struct Verification {
        var ok: Bool
        var error: String
        var chain: [X509Certificate]
    }

    func evaluate(presented: [X509Certificate]) -> TrustVerdict {
        guard let leaf = presented.first else { return .rejected("the server presented no certificate") }
        let ai = policy.allowInvalidCertificates
        let vd = policy.validateDomainName

        // "valid": builds to a root of the store, within dates, and (with validate_domain_name) names the host.
        var verification: Verification?
        func validity() -> (Bool, String, [X509Certificate]) {
            let result = verification ?? verify(presented, store: TrustStores.shared.store(caFile: policy.caFile), partial: false)
            verification = result
            if !result.ok { return (false, "chain: \(result.error)", result.chain) }
            if vd && !leaf.matches(host: host) { return (false, "host name: certificate is not valid for \(host)", result.chain) }
            return (true, "", result.chain)
        }

        switch policy.pinning {
        case .none:
            if ai { return .accepted("step 1: invalid certificates allowed") }
            let (valid, reason, _) = validity()
            return valid ? .accepted("step 1: chain valid") : .rejected("step 1: \(reason)")
        case .certificate, .publicKey:
            if !ai {
                let (valid, reason, _) = validity()
                if !valid { return .rejected("step 2: \(reason)") }
            }
        }

        if policy.pinning == .certificate {
            let pinned = policy.pinnedCertificates.flatMap { X509Certificate.parse($0) }
            let result = verify(presented, store: TrustStores.anchors(pinned), partial: true)
            if !result.ok { return .rejected("step 3: chain does not reach a pinned certificate: \(result.error)") }
            if vd && !leaf.matches(host: host) { return .rejected("step 3: host name: certificate is not valid for \(host)") }
            let pinnedDER = Set(policy.pinnedCertificates)
            guard let match = result.chain.first(where: { pinnedDER.contains($0.der) }) else {
                return .rejected("step 3: no certificate of the chain is pinned")
            }
            return .accepted("step 3: pinned certificate \(match.subject)")
        }

        // public_key: the chain as built (the verified path from the leaf plus the anchor that completed it). A
        // presented certificate off that path proves nothing (anyone can send a pinned CA's public certificate
        // next to a leaf of their own), so its key never counts. With AI nothing was verified: the path is the
        // presented certificates that sign one another from the leaf up.
        let chain = ai ? Self.signedPath(presented) : validity().2
        let pins = Set(policy.pinnedKeyHashes)
        guard let match = chain.first(where: { pins.contains($0.spkiSHA256) }) else {
            return .rejected("step 4: no pinned public key in the chain (\(chain.map(\.subject).joined(separator: " ← ")))")
        }
        return .accepted("step 4: \(match.pin) matched \(match.subject)")
    }

    /// The chain whose public keys step 4 of a `public_key` rule looks at, as `hookproxy pin` needs it: the chain as
    /// built when `presented` verifies against the store (dates included, the host name not: that is step 2's
    /// business), and `verified` true; otherwise the leaf's signed path (`signedPath`), which is what counts once
    /// `allow_invalid_certificates` is set (without it such a chain fails step 2 whatever the pins).
    func publicKeyChain(_ presented: [X509Certificate]) -> (chain: [X509Certificate], verified: Bool) {
        let result = verify(presented, store: TrustStores.shared.store(caFile: policy.caFile), partial: false)
        return result.ok ? (result.chain, true) : (Self.signedPath(presented), false)
    }

    /// The leaf followed by each presented certificate that issued (and whose key verifies the signature of) the one
    /// before it, until a self-issued certificate or one with no presented issuer. Every certificate (by DER) at most once, so
    /// a loop (A signed by B, B by A) or duplicates end the walk. Dates and CA flags are not looked at (AI). At most
    /// `2n + 8` signature checks for n presented certificates: a server sending hundreds of certificates that all name
    /// the right issuer but carry the wrong key cannot make this (on the event loop, inside the handshake) quadratic.
    static func signedPath(_ presented: [X509Certificate]) -> [X509Certificate] {
        guard let leaf = presented.first else { return [] }
        var path = [leaf]
        var unused: [X509Certificate] = []
        var seen: Set<[UInt8]> = [leaf.der]
        for certificate in presented.dropFirst() where seen.insert(certificate.der).inserted { unused.append(certificate) }
        var current = leaf
        var budget = 2 * presented.count + 8
        while X509_check_issued(current.pointer, current.pointer) != X509_V_OK,
              let index = unused.firstIndex(where: { candidate in
                  guard budget > 0, X509_check_issued(candidate.pointer, current.pointer) == X509_V_OK else { return false }
                  budget -= 1
                  return X509_get0_pubkey(candidate.pointer).map { X509_verify(current.pointer, $0) == 1 } == true
              }) {
            current = unused.remove(at: index)
            path.append(current)
        }
        ERR_clear_error()
        return path
    }

    /// Verifies `presented` (leaf first) against `store` (a reference this call takes over and frees); `partial`
    /// lets a non-self-signed anchor end the chain.
    private func verify(_ presented: [X509Certificate], store: OpaquePointer?, partial: Bool) -> Verification {
        guard let store else {
            return Verification(ok: false, error: "cannot read the trust store\(policy.caFile.map { " \($0)" } ?? "")", chain: presented)
        }
        defer { X509_STORE_free(store) }
        guard let leaf = presented.first else { return Verification(ok: false, error: "no certificate", chain: presented) }
        guard let context = X509_STORE_CTX_new(), let untrusted = hp_sk_X509_new_null() else {
            return Verification(ok: false, error: "out of memory", chain: presented)
        }
        defer {
            X509_STORE_CTX_free(context)
            hp_sk_X509_free(untrusted)
        }
        for certificate in presented.dropFirst() { _ = hp_sk_X509_push(untrusted, certificate.pointer) }
        X509_STORE_CTX_init(context, store, leaf.pointer, untrusted)
        // What OpenSSL's TLS client (and so curl) verifies a server with: purpose sslserver (the leaf must allow
        // serverAuth, the CAs must be CAs) and the matching trust settings.
        X509_STORE_CTX_set_default(context, "ssl_server")
        if partial { X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(context), hp_x509_v_flag_partial_chain()) }
        clock.apply(to: X509_STORE_CTX_get0_param(context))
        let ok = X509_verify_cert(context) == 1
        let error = ok ? "" : clock.dateFailure(context)
            ?? String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(context))))
        var chain: [X509Certificate] = []
        if let built = X509_STORE_CTX_get1_chain(context) {
            for index in 0..<hp_sk_X509_num(built) {
                if let certificate = hp_sk_X509_value(built, index) { chain.append(X509Certificate(retaining: certificate)) }
            }
            hp_sk_X509_pop_free(built)
        }
        ERR_clear_error()
        return Verification(ok: ok, error: error, chain: chain.isEmpty ? presented : chain)
    }
}
