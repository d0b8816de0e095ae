import NIOSSL

/// What a TLS TestOrigin presents: a certificate chain (leaf first, e.g. `[L, I]` or `[L, I, R]`) and the leaf's
/// private key, both PEM. Any thread (immutable).
public struct TestTLSIdentity: Sendable {
    public var chainPEM: [String]
    public var privateKeyPEM: String

    public init(chainPEM: [String], privateKeyPEM: String) {
        self.chainPEM = chainPEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// The chain's PEMs with the first certificate's key.
    public init(chain: [TestCertificate]) {
        precondition(!chain.isEmpty, "a TLS identity needs at least a leaf")
        self.init(chainPEM: chain.map(\.pem), privateKeyPEM: chain[0].privateKeyPEM)
    }

    func makeServerContext(clientCA: TestCertificate?, alpn: [String] = ["http/1.1"]) throws -> NIOSSLContext {
        let certificates = try chainPEM.map { try NIOSSLCertificate(bytes: Array($0.utf8), format: .pem) }
        let key = try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificates.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.applicationProtocols = alpn
        if let clientCA {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: clientCA.der, format: .der)])
        }
        return try NIOSSLContext(configuration: configuration)
    }
}
