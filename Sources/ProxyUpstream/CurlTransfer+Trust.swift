internal import CCurl
internal import COpenSSL
import ProxyModel

// The `trust` hook: hookproxy's own verification inside the TLS handshake, before any request byte is sent.
// curl's verification is switched off for such a transfer and an OpenSSL certificate-verify callback decides.
// Runs on the transfer's event loop, inside the handshake.
extension CurlTransfer {
    func configureTLS(_ easy: CurlEasy) throws(CurlError) {
        guard request.head.url.scheme == "https", request.trust != nil else {
            try easy.set(CURLOPT_SSL_VERIFYPEER, true)
            try easy.set(CURLOPT_SSL_VERIFYHOST, 2)
            return
        }
        try easy.set(CURLOPT_SSL_VERIFYPEER, false)
        try easy.set(CURLOPT_SSL_VERIFYHOST, 0)
        // A connection verified under one policy is never used for a flow under another: policy flows get a fresh
        // connection, never kept, and no TLS session resumption (a resumed session presents no chain to judge).
        try easy.set(CURLOPT_FRESH_CONNECT, true)
        try easy.set(CURLOPT_FORBID_REUSE, true)
        try easy.set(CURLOPT_SSL_SESSIONID_CACHE, false)
        try easy.setSSLContextCallback({ _, sslContext, context in
            guard let sslContext, let context else { return CURLE_ABORTED_BY_CALLBACK }
            let ctx = OpaquePointer(sslContext)
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

    /// Applies the policy to the chain the server presented; records the decision as a hook event.
    fileprivate func judgeServerTrust(_ storeContext: OpaquePointer) -> Bool {
        guard let policy = request.trust else { return true }
        let presented = X509Certificate.presentedChain(storeContext)
        let host = request.head.url.host
        switch TrustEvaluator(policy: policy, host: host).evaluate(presented: presented) {
        case .accepted(let reason):
            events.append(HookEvent(hook: .trust, action: "trust accepted", detail: "\(reason) [rule \(policy.rule)]"))
            return true
        case .rejected(let reason):
            let subjects = presented.map(\.subject).joined(separator: " ← ")
            events.append(HookEvent(hook: .trust, action: "trust rejected", detail: "\(reason) [rule \(policy.rule)]"))
            recordedError = ProxyError(.trustRejected, "hookproxy: trust rejected \(host): \(reason) (chain: \(subjects))")
            X509_STORE_CTX_set_error(storeContext, hp_x509_v_err_application_verification())
            return false
        }
    }
}
