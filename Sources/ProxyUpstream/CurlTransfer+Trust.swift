internal import CCurl
internal import COpenSSL
import ProxyModel

// The `trust` hook: hookproxy's own verification inside the TLS handshake, before any request byte is sent.
// curl's verification is switched off for such a transfer and an OpenSSL certificate-verify callback decides.
// Without a rule curl verifies, at the `--verify-time` clock when one is set. Runs on the transfer's event loop,
// inside the handshake.
extension CurlTransfer {
    func configureTLS(_ easy: CurlEasy) throws(CurlError) {
        guard request.head.url.scheme == "https", let policy = request.trust else {
            try easy.set(CURLOPT_SSL_VERIFYPEER, true)
            try easy.set(CURLOPT_SSL_VERIFYHOST, 2)
            guard request.head.url.scheme == "https" else { return }
            if request.settings.verifyTime != nil { return try configureDefaultClock(easy) }
            try easy.setSSLContextCallback({ _, sslContext, _ in
                guard let sslContext else { return CURLE_ABORTED_BY_CALLBACK }
                CloseNotifyLedger.watch(OpaquePointer(sslContext))
                return CURLE_OK
            })
            return
        }
        try easy.set(CURLOPT_SSL_VERIFYPEER, false)
        try easy.set(CURLOPT_SSL_VERIFYHOST, 0)
        // A connection verified under one policy is never used for a flow under another, and flows under the same
        // policy share one (an HTTP/2 origin's streams multiplex on it). libcurl reuses a connection only when the
        // TLS configuration matches, the CA file path included; with its own verification off it does not need the
        // file to exist. So the path names the policy: one connection per origin and policy. No TLS session
        // resumption: a resumed session presents no chain to judge.
        try easy.set(CURLOPT_CAINFO, Self.policyKey(policy))
        try easy.set(CURLOPT_SSL_SESSIONID_CACHE, false)
        try easy.setSSLContextCallback({ _, sslContext, context in
            guard let sslContext, let context else { return CURLE_ABORTED_BY_CALLBACK }
            let ctx = OpaquePointer(sslContext)
            // The verify callback's context is the transfer that opened the connection; a renegotiation later in the
            // connection's life (another transfer's) must not call back into it.
            hp_SSL_CTX_forbid_renegotiation(ctx)
            CloseNotifyLedger.watch(ctx)
            hp_SSL_CTX_set_verify(ctx, hp_ssl_verify_peer(), nil)
            hp_SSL_CTX_set_cert_verify_callback(ctx, { storeContext, context in
                guard let storeContext, let context else { return 0 }
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
                return transfer.judgeServerTrust(storeContext) ? 1 : 0
            }, context)
            return CURLE_OK
        })
        try easy.set(CURLOPT_SSL_CTX_DATA, pointer: Unmanaged.passUnretained(self).toOpaque())
    }

    /// The CA-file path that keys a policy's connections (never read: curl's own verification is off for them).
    static func policyKey(_ policy: TrustPolicy) -> String {
        "/nonexistent/hookproxy-trust-policy/\(String(UInt(bitPattern: policy.hashValue), radix: 16))"
    }

    /// A flow that reused a connection its policy had verified sees no handshake: its log says so.
    func reusedVerifiedConnectionEvent(newConnections: Int) -> HookEvent? {
        guard let policy = request.trust, request.head.url.scheme == "https", newConnections == 0,
              !events.contains(where: { $0.hook == .trust }) else { return nil }
        return HookEvent(hook: .trust, action: "trust accepted",
                         detail: "connection already verified under this policy [rule \(policy.rule)]")
    }

    /// curl's own verification (no `trust` rule) at the `--verify-time` instant: OpenSSL's verification runs as it
    /// would, on the handshake's store context with the clock set, and a date failure is reported with its date.
    private func configureDefaultClock(_ easy: CurlEasy) throws(CurlError) {
        try easy.setSSLContextCallback({ _, sslContext, context in
            guard let sslContext, let context else { return CURLE_ABORTED_BY_CALLBACK }
            let ctx = OpaquePointer(sslContext)
            // As with a trust rule: the context is the transfer that opened the connection, freed when it ends, and a
            // renegotiation on the reused connection would call back into it (a use after free).
            hp_SSL_CTX_forbid_renegotiation(ctx)
            CloseNotifyLedger.watch(ctx)
            hp_SSL_CTX_set_cert_verify_callback(ctx, { storeContext, context in
                guard let storeContext, let context else { return 0 }
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
                return transfer.verifyAtDefaultClock(storeContext) ? 1 : 0
            }, context)
            return CURLE_OK
        })
        try easy.set(CURLOPT_SSL_CTX_DATA, pointer: Unmanaged.passUnretained(self).toOpaque())
    }

    fileprivate func verifyAtDefaultClock(_ storeContext: OpaquePointer) -> Bool {
        let clock = VerifyClock(rule: nil, flag: request.settings.verifyTime)
        clock.apply(to: X509_STORE_CTX_get0_param(storeContext))
        if X509_verify_cert(storeContext) == 1 { return true }
        if let failure = clock.dateFailure(storeContext) {
            recordedError = ProxyError(.tlsFailed, "hookproxy: TLS failure \(host): \(failure)")
        }
        return false
    }

    /// Applies the policy to the chain the server presented; records the decision as a hook event, naming the
    /// verify clock when it is not now.
    fileprivate func judgeServerTrust(_ storeContext: OpaquePointer) -> Bool {
        guard let policy = request.trust else { return true }
        let presented = X509Certificate.presentedChain(storeContext)
        let host = request.head.url.host
        let clock = VerifyClock(rule: policy.verifyTime, flag: request.settings.verifyTime)
        let tag = "[rule \(policy.rule)\(clock.label.map { ", \($0)" } ?? "")]"
        let chain = presented.map { CertificateSummary(subject: $0.subject, issuer: $0.issuer, notAfter: $0.notAfter, pin: $0.pin) }
        switch TrustEvaluator(policy: policy, host: host, clock: clock).evaluate(presented: presented) {
        case .accepted(let reason):
            events.append(HookEvent(hook: .trust, action: "trust accepted", detail: "\(reason) \(tag)", chain: chain))
            return true
        case .rejected(let reason):
            let subjects = presented.map(\.subject).joined(separator: " ← ")
            events.append(HookEvent(hook: .trust, action: "trust rejected", detail: "\(reason) \(tag)", chain: chain))
            recordedError = ProxyError(.trustRejected, "hookproxy: trust rejected \(host): \(reason) (chain: \(subjects))")
            X509_STORE_CTX_set_error(storeContext, hp_x509_v_err_application_verification())
            return false
        }
    }
}
