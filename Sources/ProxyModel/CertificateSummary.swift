/// One certificate of the chain a server presented, as the logs and the viewer show it on a `trust` event: what it
/// names, who signed it, when it expires, and its public-key pin (`sha256//…`, as `trust.pins` lists them).
public struct CertificateSummary: Sendable, Hashable, Codable {
    public var subject: String
    public var issuer: String
    public var notAfter: String
    public var pin: String

    public init(subject: String, issuer: String, notAfter: String, pin: String) {
        self.subject = subject
        self.issuer = issuer
        self.notAfter = notAfter
        self.pin = pin
    }
}
