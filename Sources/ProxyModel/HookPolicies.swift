/// What to do when the upstream answers 3xx (`on_redirect`). The vocabulary is AFNetworking's.
public struct RedirectPolicy: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable, CaseIterable { case pass, follow, block, rewrite }
    /// A prefix rewrite of the absolute Location.
    public struct Rewrite: Sendable, Hashable {
        public var from: String
        public var to: String
        public init(from: String, to: String) { self.from = from; self.to = to }
    }

    public var rule: String
    public var action: Action
    public var maxHops: Int
    public var rewrite: Rewrite?
    public var sameHostOnly: Bool

    public init(rule: String, action: Action, maxHops: Int = 10, rewrite: Rewrite? = nil, sameHostOnly: Bool = false) {
        self.rule = rule
        self.action = action
        self.maxHops = maxHops
        self.rewrite = rewrite
        self.sameHostOnly = sameHostOnly
    }
}

/// An authentication scheme hookproxy may answer a challenge with.
public enum AuthScheme: String, Sendable, Hashable, CaseIterable { case any, basic, digest, ntlm, negotiate }

/// A client certificate and key (PEM files), with an optional key passphrase.
public struct ClientCertificate: Sendable, Hashable {
    public var certificatePath: String
    public var keyPath: String
    public var passphrase: String?
    public init(certificatePath: String, keyPath: String, passphrase: String? = nil) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.passphrase = passphrase
    }
}

/// What to do when the upstream asks for credentials (`on_challenge`).
public struct ChallengePolicy: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable, CaseIterable { case pass, useCredential = "use_credential", cancel }

    public var rule: String
    public var action: Action
    public var schemes: [AuthScheme]
    public var username: String?
    /// A secret: never logged.
    public var password: String?
    public var clientCertificate: ClientCertificate?

    public init(rule: String, action: Action, schemes: [AuthScheme] = [.any], username: String? = nil,
                password: String? = nil, clientCertificate: ClientCertificate? = nil) {
        self.rule = rule
        self.action = action
        self.schemes = schemes
        self.username = username
        self.password = password
        self.clientCertificate = clientCertificate
    }
}

/// How to judge the upstream's certificate chain (`trust`), as AFSecurityPolicy does.
/// Pins and certificates are already decoded at load time.
public struct TrustPolicy: Sendable, Hashable {
    public enum Pinning: String, Sendable, Hashable, CaseIterable { case none, certificate, publicKey = "public_key" }

    public var rule: String
    public var pinning: Pinning
    /// SHA-256 digests of SubjectPublicKeyInfo DER (from `pins`, and from `certificates` in public_key mode).
    public var pinnedKeyHashes: [[UInt8]]
    /// DER of every pinned certificate (from `certificates`).
    public var pinnedCertificates: [[UInt8]]
    /// PEM file replacing the system store, when given.
    public var caFile: String?
    public var allowInvalidCertificates: Bool
    public var validateDomainName: Bool
    /// `verify_time`: certificate dates are checked at this instant instead of now (it wins over `--verify-time`).
    public var verifyTime: UTCInstant?

    public init(rule: String, pinning: Pinning = .none, pinnedKeyHashes: [[UInt8]] = [], pinnedCertificates: [[UInt8]] = [],
                caFile: String? = nil, allowInvalidCertificates: Bool = false, validateDomainName: Bool = true,
                verifyTime: UTCInstant? = nil) {
        self.rule = rule
        self.pinning = pinning
        self.pinnedKeyHashes = pinnedKeyHashes
        self.pinnedCertificates = pinnedCertificates
        self.caFile = caFile
        self.allowInvalidCertificates = allowInvalidCertificates
        self.validateDomainName = validateDomainName
        self.verifyTime = verifyTime
    }
}
