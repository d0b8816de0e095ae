internal import CCurl
import ProxyModel

// The `on_challenge` hook's libcurl side: credentials to answer a 401 with, and a client certificate to present
// when the server asks for one. Runs on the transfer's event loop, inside curl.
extension CurlTransfer {
    func configureChallenge(_ easy: CurlEasy) throws(CurlError) {
        guard let challenge = request.challenge else { return }
        try configureClientCertificate(easy)
        guard challenge.action == .useCredential, let username = challenge.username else { return }
        try easy.set(CURLOPT_USERNAME, username)
        try easy.set(CURLOPT_PASSWORD, challenge.password ?? "")
        try easy.set(CURLOPT_HTTPAUTH, CurlTransfer.authMask(challenge.schemes))
    }

    /// The rule's client certificate, presented when the server asks for one (also on a connection made for an
    /// upgrade, whose HTTP is not curl's).
    func configureClientCertificate(_ easy: CurlEasy) throws(CurlError) {
        guard let certificate = request.challenge?.clientCertificate else { return }
        try easy.set(CURLOPT_SSLCERT, certificate.certificatePath)
        try easy.set(CURLOPT_SSLKEY, certificate.keyPath)
        if let passphrase = certificate.passphrase { try easy.set(CURLOPT_KEYPASSWD, passphrase) }
    }

    /// The CURLAUTH bits for `schemes`. A single scheme gets CURLAUTH_ONLY so curl waits for the server's
    /// challenge instead of sending the credential unasked.
    static func authMask(_ schemes: [AuthScheme]) -> Int {
        var mask = 0
        for scheme in schemes {
            switch scheme {
            case .any: mask |= hp_auth_any()
            case .basic: mask |= hp_auth_basic()
            case .digest: mask |= hp_auth_digest()
            case .ntlm: mask |= hp_auth_ntlm()
            case .negotiate: mask |= hp_auth_negotiate()
            }
        }
        if schemes.count == 1 && schemes[0] != .any { mask |= hp_auth_only() }
        return mask
    }

    /// The scheme curl most likely answered with: the strongest offered one the rule allows.
    func answeredScheme(_ easy: CurlEasy) -> String? {
        guard let offered = easy.info(CURLINFO_HTTPAUTH_AVAIL), offered != 0, let challenge = request.challenge else { return nil }
        let allowed = CurlTransfer.authMask(challenge.schemes)
        let order: [(Int, String)] = [(hp_auth_negotiate(), "negotiate"), (hp_auth_ntlm(), "ntlm"),
                                      (hp_auth_digest(), "digest"), (hp_auth_basic(), "basic")]
        return order.first { offered & $0.0 != 0 && allowed & $0.0 != 0 }?.1
    }
}
