internal import CCurl
internal import COpenSSL
import Glibc
import ProxyModel

/// What `hookproxy pin` shows: the chain a server presents, and whether it verifies.
public struct ChainReport: Sendable {
    /// The certificates in the order the server presented them (leaf first).
    public var presented: [X509Certificate]
    /// nil when the chain verifies against the store (and names the host), else why not.
    public var verificationFailure: String?
    /// The presented certificates (by index) whose public key a `public_key` pin can never match, and why: trust
    /// rules count only the keys of the chain as built (TrustEvaluator step 4). The others are on that chain.
    public var offChain: [Int: OffChainReason]

    /// Why a presented certificate is not on the chain whose keys a `public_key` rule counts.
    public enum OffChainReason: Sendable, Equatable {
        /// The chain verifies against the store, and this certificate is not on the path it was built along.
        case notOnVerifiedChain
        /// The chain does not verify (it can pass only with `allow_invalid_certificates`), and this certificate
        /// does not sign the leaf or a certificate that signs it, one after another.
        case notOnSignedPath
    }
}

/// Connects to a TLS server with libcurl (no request is sent) and captures its certificate chain.
/// Blocking; for the CLI, not for the proxy's paths.
public enum ChainInspector {
    /// - Parameters:
    ///   - serverName: the name sent as SNI and checked against the certificate (default: `host`).
    ///   - caFile: PEM bundle replacing the system store for the verification verdict.
    public static func inspect(host: String, port: Int, serverName: String? = nil, caFile: String? = nil,
                               timeoutMs: Int = 10_000) throws(ProxyError) -> ChainReport {
        let name = serverName ?? host
        let capture = Capture(host: name, caFile: caFile)
        let easy = CurlEasy()
        let authority = name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)"
        do {
            try easy.set(CURLOPT_URL, "https://\(authority)/")
            if serverName != nil {
                let target = host.contains(":") ? "[\(host)]" : host
                try easy.setConnectTo(["\(name):\(port):\(target):\(port)"])
            }
            try easy.set(CURLOPT_CONNECT_ONLY, 1)
            try easy.set(CURLOPT_NOSIGNAL, true)
            try easy.set(CURLOPT_PROXY, "")
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, timeoutMs)
            try easy.set(CURLOPT_TIMEOUT_MS, timeoutMs)
            try easy.set(CURLOPT_SSL_VERIFYPEER, false)
            try easy.set(CURLOPT_SSL_VERIFYHOST, 0)
            try easy.set(CURLOPT_SSL_SESSIONID_CACHE, false)
            try easy.setSSLContextCallback({ _, sslContext, context in
                guard let sslContext, let context else { return CURLE_ABORTED_BY_CALLBACK }
                let ctx = OpaquePointer(sslContext)
                hp_SSL_CTX_set_verify(ctx, hp_ssl_verify_peer(), nil)
                hp_SSL_CTX_set_cert_verify_callback(ctx, { storeContext, context in
                    guard let storeContext, let context else { return 0 }
                    Unmanaged<Capture>.fromOpaque(context).takeUnretainedValue().take(storeContext)
                    return 1
                }, context)
                return CURLE_OK
            })
            try easy.set(CURLOPT_SSL_CTX_DATA, pointer: Unmanaged.passUnretained(capture).toOpaque())
        } catch {
            throw ProxyError(.internalError, "hookproxy: cannot set up the connection to \(authority): \(error)")
        }
        let code = curl_easy_perform(easy.handle)
        guard code == CURLE_OK, !capture.presented.isEmpty else {
            let reason = String(cString: curl_easy_strerror(code))
            throw ProxyError(.connectFailed, "hookproxy: cannot reach \(host):\(port): \(reason)")
        }
        return ChainReport(presented: capture.presented, verificationFailure: capture.failure, offChain: capture.offChain)
    }

    /// Collects the chain inside the handshake (on the calling thread) and judges it with policy `none`.
    private final class Capture {
        let host: String
        let caFile: String?
        var presented: [X509Certificate] = []
        var failure: String?
        var offChain: [Int: ChainReport.OffChainReason] = [:]

        init(host: String, caFile: String?) {
            self.host = host
            self.caFile = caFile
        }

        func take(_ storeContext: OpaquePointer) {
            presented = X509Certificate.presentedChain(storeContext)
            let policy = TrustPolicy(rule: "pin", caFile: caFile)
            let evaluator = TrustEvaluator(policy: policy, host: host)
            if case .rejected(let reason) = evaluator.evaluate(presented: presented) {
                failure = reason.replacing("step 1: ", with: "")
            }
            // A presented certificate counts when its key is on the chain: by key, as step 4 matches pins.
            let (chain, verified) = evaluator.publicKeyChain(presented)
            let keys = Set(chain.map(\.spkiSHA256))
            for (index, certificate) in presented.enumerated() where !keys.contains(certificate.spkiSHA256) {
                offChain[index] = verified ? .notOnVerifiedChain : .notOnSignedPath
            }
        }
    }
}

extension X509Certificate {
    /// The chain the peer presented during this verification, leaf first, without duplicates.
    static func presentedChain(_ storeContext: OpaquePointer) -> [X509Certificate] {
        var presented: [X509Certificate] = []
        if let leaf = X509_STORE_CTX_get0_cert(storeContext) { presented.append(X509Certificate(retaining: leaf)) }
        if let untrusted = X509_STORE_CTX_get0_untrusted(storeContext) {
            for index in 0..<hp_sk_X509_num(untrusted) {
                guard let certificate = hp_sk_X509_value(untrusted, index) else { continue }
                let wrapped = X509Certificate(retaining: certificate)
                if !presented.contains(where: { $0.der == wrapped.der }) { presented.append(wrapped) }
            }
        }
        return presented
    }
}
