import Crypto
import FoundationEssentials
import ProxyModel
import Glibc
import NIOSSL
import X509

/// hookproxy's local CA: created on first need in the CA directory (`hookproxy-ca.pem`, and `hookproxy-ca.key`
/// written 0600 and never logged), loaded as it is afterwards. It signs the short-lived leaf certificates that
/// interception presents to clients. Immutable after loading; thread-safe.
public final class CertificateAuthority: Sendable {
    public static let certificateFile = "hookproxy-ca.pem"
    public static let keyFile = "hookproxy-ca.key"

    public let directory: String
    public let certificate: Certificate
    public let certificatePEM: String
    private let key: P256.Signing.PrivateKey
    /// One key for every leaf this process mints: signing is then the only per-host cost.
    private let leafKey = P256.Signing.PrivateKey()

    public var certificatePath: String { PathText.appending(Self.certificateFile, to: directory) }
    public var keyPath: String { PathText.appending(Self.keyFile, to: directory) }

    /// SHA-256 of the certificate's DER as colon-separated upper-case hex.
    public var fingerprint: String {
        let der = (try? certificate.serializeAsPEM().derBytes) ?? []
        return HexText.colonSeparated(SHA256.hash(data: der))
    }

    /// Loads the CA from `directory`, creating it (and the directory) when neither file exists.
    /// A directory that cannot be read or a broken file is an error, never a silent new CA.
    public static func loadOrCreate(directory: String) throws(CAError) -> CertificateAuthority {
        try checkDirectory(directory)
        let fileManager = FileManager.default
        let certificatePath = PathText.appending(certificateFile, to: directory)
        let keyPath = PathText.appending(keyFile, to: directory)
        let hasCertificate = fileManager.fileExists(atPath: certificatePath)
        let hasKey = fileManager.fileExists(atPath: keyPath)
        if !hasCertificate && !hasKey {
            return try create(directory: directory)
        }
        guard hasCertificate && hasKey else {
            throw CAError("hookproxy: the CA in \(directory) is incomplete (\(hasCertificate ? keyFile : certificateFile) is missing); restore it, or remove \(hasCertificate ? certificateFile : keyFile) to create a new CA")
        }
        /// (the words of Foundation's NSError.localizedDescription, but for a directory, of which it said nothing)
        func read(_ path: String) throws(CAError) -> String {
            do {
                return try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                let reason = FileReadFailure.reason(error, path: path).map { "The operation could not be completed. \($0)" }
                    ?? "\(path) is a directory"
                throw CAError("hookproxy: cannot read the CA in \(directory): \(reason)")
            }
        }
        let certificatePEM = try read(certificatePath)
        let keyPEM = try read(keyPath)
        let certificate: Certificate
        let key: P256.Signing.PrivateKey
        do {
            certificate = try Certificate(pemEncoded: certificatePEM)
        } catch {
            throw CAError("hookproxy: \(certificatePath) is not a PEM certificate (\(error)); restore it, or remove both CA files to create a new CA")
        }
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
        } catch {
            throw CAError("hookproxy: \(keyPath) is not a P-256 private key in PEM; restore it, or remove both CA files to create a new CA")
        }
        guard certificate.publicKey == Certificate.PublicKey(key.publicKey) else {
            throw CAError("hookproxy: \(keyPath) does not belong to \(certificatePath); restore the pair, or remove both to create a new CA")
        }
        try checkKeyPermissions(keyPath)
        try checkUsable(certificate, path: certificatePath)
        return CertificateAuthority(directory: directory, certificate: certificate, certificatePEM: certificatePEM, key: key)
    }

    /// Refuses a CA directory someone else could write to: whoever can replace `hookproxy-ca.key` or
    /// `hookproxy-ca.pem` there can read intercepted traffic, or have hookproxy mint certificates from their own CA.
    /// The directory must belong to this user and be writable by no group or other user. A missing directory is
    /// fine (it is created 0700).
    public static func checkDirectory(_ directory: String) throws(CAError) {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            if errno == ENOENT { return }
            throw CAError("hookproxy: cannot read the CA directory \(directory): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CAError("hookproxy: the CA directory \(directory) is not a directory; pass another --ca-dir")
        }
        let owner = geteuid()
        guard info.st_uid == owner else {
            throw CAError("hookproxy: the CA directory \(directory) belongs to another user (uid \(info.st_uid), not \(owner)); use a directory of your own with --ca-dir, or chown it to yourself and chmod 700 \(directory)")
        }
        let permissions = info.st_mode & 0o777
        guard permissions & 0o022 == 0 else {
            let mode = String(permissions, radix: 8)
            throw CAError("hookproxy: the CA directory \(directory) is group- or world-writable (mode \(mode)), so others could replace the CA; run chmod 700 \(directory)")
        }
    }

    /// Refuses a CA key others could read (as ssh refuses such a private key): whoever reads it can impersonate
    /// any site to every machine that trusts the CA.
    static func checkKeyPermissions(_ keyPath: String) throws(CAError) {
        var info = stat()
        guard stat(keyPath, &info) == 0 else {
            throw CAError("hookproxy: cannot read \(keyPath): \(String(cString: strerror(errno)))")
        }
        let permissions = info.st_mode & 0o777
        guard permissions & 0o077 == 0 else {
            let mode = String(permissions, radix: 8)
            throw CAError("hookproxy: \(keyPath) can be read by other users (mode \(mode)), and whoever holds it can impersonate any site to machines that trust the CA; run chmod 600 \(keyPath)")
        }
    }

    /// Refuses a certificate that cannot sign the leaves clients would accept: not a CA (basic constraints), not
    /// allowed to sign certificates (key usage), or outside its validity dates. Every client would otherwise reject
    /// every intercepted connection, and the log would blame the client.
    static func checkUsable(_ certificate: Certificate, path: String, now: Date = Date()) throws(CAError) {
        let remedy = "remove both CA files to create a new CA (clients must then trust the new one), or restore a CA certificate"
        let constraints = try? certificate.extensions.basicConstraints
        guard case .isCertificateAuthority = constraints else {
            throw CAError("hookproxy: \(path) is not a CA certificate (its basic constraints do not say CA:TRUE), so clients reject the leaves it signs; \(remedy)")
        }
        if let usage = try? certificate.extensions.keyUsage, !usage.keyCertSign {
            throw CAError("hookproxy: \(path) may not sign certificates (its key usage lacks keyCertSign), so clients reject the leaves it signs; \(remedy)")
        }
        guard now >= certificate.notValidBefore else {
            throw CAError("hookproxy: \(path) is not valid before \(iso8601(certificate.notValidBefore)) (is the clock right?), so clients reject the leaves it signs; \(remedy)")
        }
        guard now <= certificate.notValidAfter else {
            throw CAError("hookproxy: \(path) expired on \(iso8601(certificate.notValidAfter)), so clients reject the leaves it signs; \(remedy)")
        }
    }

    /// `2031-01-01T00:00:00Z`, as ISO8601DateFormatter wrote a certificate's date (to the second, UTC).
    static func iso8601(_ date: Date) -> String {
        UTCInstant(secondsSince1970: Int64(date.timeIntervalSince1970.rounded(.down))).description
    }

    private static func create(directory: String) throws(CAError) -> CertificateAuthority {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CAError("hookproxy: cannot create a CA in \(directory): \(FileReadFailure.systemWords(error))")
        }
        do {
            let key = P256.Signing.PrivateKey()
            let machine = ProcessInfo.processInfo.hostName
            let name = try DistinguishedName {
                CommonName("hookproxy CA (\(machine))")
                OrganizationName("hookproxy local debugging CA")
            }
            let publicKey = Certificate.PublicKey(key.publicKey)
            let now = Date()
            let certificate = try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
                notValidBefore: now - 3600, notValidAfter: now + 10 * 365 * 86_400,
                issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: publicKey)
                },
                issuerPrivateKey: Certificate.PrivateKey(key))
            let certificatePEM = try certificate.serializeAsPEM().pemString + "\n"
            let ca = CertificateAuthority(directory: directory, certificate: certificate, certificatePEM: certificatePEM, key: key)
            try writeFile(ca.keyPath, key.pemRepresentation + "\n", mode: 0o600)
            try writeFile(ca.certificatePath, certificatePEM, mode: 0o600)
            return ca
        } catch let error as CAError {
            throw error
        } catch {
            throw CAError("hookproxy: cannot create a CA in \(directory): \(error)")
        }
    }

    private static func writeFile(_ path: String, _ text: String, mode: mode_t) throws(CAError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else {
            throw CAError("hookproxy: cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        fchmod(descriptor, mode)
        let bytes = Array(text.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else {
            throw CAError("hookproxy: cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    private init(directory: String, certificate: Certificate, certificatePEM: String, key: P256.Signing.PrivateKey) {
        self.directory = directory
        self.certificate = certificate
        self.certificatePEM = certificatePEM
        self.key = key
    }

    /// How long a leaf is valid: a week, or less when the CA expires sooner.
    static let leafLifetime: Duration = .seconds(7 * 86_400)

    /// A leaf for `host` (an IP address gets an IP SAN), signed by this CA, valid for `lifetime` but never past the
    /// CA's own end (a client rejects a leaf that outlives its issuer), and how long from now it stays valid.
    /// CPU-bound: call it off the event loops.
    func mintLeaf(for host: String, lifetime: Duration = leafLifetime)
        throws -> (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, validFor: Duration) {
        let publicKey = Certificate.PublicKey(leafKey.publicKey)
        let now = Date()
        let notValidAfter = min(now + Double(lifetime.components.seconds), certificate.notValidAfter)
        let name = GeneralName.forHost(host)
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: now - 3600, notValidAfter: notValidAfter,
            issuer: self.certificate.subject, subject: try DistinguishedName { CommonName(String(host.prefix(64))) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([name])
                AuthorityKeyIdentifier(keyIdentifier: try self.certificate.extensions.subjectKeyIdentifier?.keyIdentifier)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
        let leafPEM = try certificate.serializeAsPEM().pemString
        return (try NIOSSLCertificate.fromPEMBytes(Array(leafPEM.utf8)),
                try NIOSSLPrivateKey(bytes: Array(leafKey.pemRepresentation.utf8), format: .pem),
                .milliseconds(Int64(max(0, notValidAfter.timeIntervalSince(now)) * 1000)))
    }
}

/// A CA that cannot be loaded or created; the message says which file and what to do.
public struct CAError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension GeneralName {
    /// An IP SAN for an IP literal, else a DNS SAN.
    static func forHost(_ host: String) -> GeneralName {
        var v4 = in_addr()
        var v6 = in6_addr()
        var bytes: [UInt8]? = nil
        if inet_pton(AF_INET, host, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        }
        guard let bytes else { return .dnsName(host) }
        // SubjectAltName ::= SEQUENCE { [7] IMPLICIT OCTET STRING address }: parsed back into a GeneralName
        let der: [UInt8] = [0x30, UInt8(bytes.count + 2), 0x87, UInt8(bytes.count)] + bytes
        let ext = Certificate.Extension(oid: .X509ExtensionID.subjectAlternativeName, critical: false, value: der[...])
        return (try? SubjectAlternativeNames(ext).first) ?? .dnsName(host)
    }
}
