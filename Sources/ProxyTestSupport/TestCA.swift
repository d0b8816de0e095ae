import Crypto
import Foundation
import X509

/// The certificate set of TRUST-CASES.md, generated at test time (P-256 keys; nothing is committed):
/// - `root` **R** → `intermediate` **I** → `leaf` **L** (SAN DNS localhost, IP 127.0.0.1);
/// - `wrongName` **W**: leaf under I for `other.invalid` only; `expired` **E**: leaf under I (localhost, 127.0.0.1)
///   whose validity ended yesterday;
/// - `unrelatedRoot` **U** with its leaf `unrelatedLeaf` **UL** (localhost, 127.0.0.1);
/// - `selfSigned` **S**: self-signed leaf (localhost, 127.0.0.1); `noDomains` **N**: self-signed, no SAN,
///   CN "No Domains";
/// - `clientCA` **CCA** and `client` **C**: a client-certificate CA and a client leaf (EKU clientAuth);
/// - `clientAuthLeaf` **LC**: like L (under I, localhost, 127.0.0.1) but with only the clientAuth EKU, so no TLS
///   client may accept it as a server;
/// - `partialWildcard` **PW**: leaf under I whose only SAN is the partial wildcard `f*.hookproxy.test` (which
///   OpenSSL matches against `foo.hookproxy.test` unless partial wildcards are refused, as curl refuses them);
/// - `leaf(notBefore:notAfter:)` mints, on each call, a leaf like L with the dates a test chooses.
///
/// `TestCA.shared` is generated once per process. Any thread (immutable).
public final class TestCA: Sendable {
    public let root: TestCertificate
    public let intermediate: TestCertificate
    public let leaf: TestCertificate
    public let wrongName: TestCertificate
    public let expired: TestCertificate
    public let unrelatedRoot: TestCertificate
    public let unrelatedLeaf: TestCertificate
    public let selfSigned: TestCertificate
    public let noDomains: TestCertificate
    public let clientCA: TestCertificate
    public let client: TestCertificate
    public let clientAuthLeaf: TestCertificate
    public let partialWildcard: TestCertificate

    /// One set per test process: generating is quick but tests share it.
    public static let shared: TestCA = {
        do { return try TestCA() } catch { fatalError("TestCA generation failed: \(error)") }
    }()

    public init() throws {
        let localhost: [GeneralName] = [.dnsName("localhost"), TestCA.loopbackIP]
        root = try TestCA.makeCA(name: "R", commonName: "hookproxy test root R", issuer: nil)
        intermediate = try TestCA.makeCA(name: "I", commonName: "hookproxy test intermediate I", issuer: root)
        leaf = try TestCA.makeLeaf(name: "L", commonName: "localhost", names: localhost, issuer: intermediate)
        wrongName = try TestCA.makeLeaf(name: "W", commonName: "other.invalid", names: [.dnsName("other.invalid")],
                                        issuer: intermediate)
        expired = try TestCA.makeLeaf(name: "E", commonName: "localhost", names: localhost, issuer: intermediate,
                                      notBefore: Date() - 30 * 86_400, notAfter: Date() - 86_400)
        unrelatedRoot = try TestCA.makeCA(name: "U", commonName: "hookproxy unrelated root U", issuer: nil)
        unrelatedLeaf = try TestCA.makeLeaf(name: "UL", commonName: "localhost", names: localhost,
                                            issuer: unrelatedRoot)
        selfSigned = try TestCA.makeLeaf(name: "S", commonName: "localhost", names: localhost, issuer: nil)
        noDomains = try TestCA.makeLeaf(name: "N", commonName: "No Domains", names: [], issuer: nil)
        clientCA = try TestCA.makeCA(name: "CCA", commonName: "hookproxy test client CA", issuer: nil)
        client = try TestCA.makeLeaf(name: "C", commonName: "hookproxy test client", names: [], issuer: clientCA,
                                     usage: .clientAuth)
        clientAuthLeaf = try TestCA.makeLeaf(name: "LC", commonName: "localhost", names: localhost,
                                             issuer: intermediate, usage: .clientAuth)
        partialWildcard = try TestCA.makeLeaf(name: "PW", commonName: "f*.hookproxy.test",
                                              names: [.dnsName("f*.hookproxy.test")], issuer: intermediate)
    }

    /// Every certificate by its TRUST-CASES.md name (`R`, `I`, `L`, `W`, `E`, `U`, `UL`, `S`, `N`, `CCA`, `C`),
    /// or `LC`, `PW`.
    public subscript(name: String) -> TestCertificate? {
        all.first { $0.name == name }
    }

    public var all: [TestCertificate] {
        [root, intermediate, leaf, wrongName, expired, unrelatedRoot, unrelatedLeaf, selfSigned, noDomains,
         clientCA, client, clientAuthLeaf, partialWildcard]
    }

    /// A new leaf like L (under I, SAN localhost and 127.0.0.1) valid from `notBefore` to `notAfter`, both cut to
    /// whole seconds as a certificate holds them: for tests that check dates at a chosen verify time.
    public func leaf(name: String = "L-dated", notBefore: Date = Date() - 3600, notAfter: Date) throws -> TestCertificate {
        func whole(_ date: Date) -> Date { Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)) }
        return try TestCA.makeLeaf(name: name, commonName: "localhost", names: [.dnsName("localhost"), TestCA.loopbackIP],
                                   issuer: intermediate, notBefore: whole(notBefore), notAfter: whole(notAfter))
    }

    /// A new leaf under I with the given common name and DNS SANs (no IP SAN), for tests of odd names: a NUL byte
    /// inside one, a name the host check must not match by truncation.
    public func leaf(name: String, commonName: String, dnsNames: [String]) throws -> TestCertificate {
        try TestCA.makeLeaf(name: name, commonName: commonName, names: dnsNames.map { .dnsName($0) }, issuer: intermediate)
    }

    /// A new self-signed CA valid from `notBefore` to `notAfter` (for tests of a CA outside its dates).
    public func ca(name: String = "CA-dated", notBefore: Date, notAfter: Date) throws -> TestCertificate {
        try TestCA.makeCA(name: name, commonName: "hookproxy test CA \(name)", issuer: nil, notBefore: notBefore, notAfter: notAfter)
    }

    /// A server identity presenting `chain` (leaf first) with the leaf's key, e.g. `identity([leaf, intermediate])`.
    public func identity(_ chain: [TestCertificate]) -> TestTLSIdentity {
        TestTLSIdentity(chain: chain)
    }

    // MARK: generation

    /// IP 127.0.0.1 as a GeneralName, built from its DER ([7] 7f000001) so no ASN.1 types are needed here.
    private static let loopbackIP: GeneralName = {
        // SubjectAltName ::= SEQUENCE { [7] IMPLICIT OCTET STRING 127.0.0.1 }
        let der: [UInt8] = [0x30, 0x06, 0x87, 0x04, 127, 0, 0, 1]
        let ext = Certificate.Extension(oid: .X509ExtensionID.subjectAlternativeName, critical: false, value: der[...])
        return try! SubjectAlternativeNames(ext).first!
    }()

    private static func makeCA(name: String, commonName: String, issuer: TestCertificate?,
                               notBefore: Date = Date() - 3600, notAfter: Date = Date() + 365 * 86_400) throws -> TestCertificate {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName(commonName); OrganizationName("hookproxy tests") }
        let publicKey = Certificate.PublicKey(key.publicKey)
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            Critical(KeyUsage(digitalSignature: true, keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: publicKey)
            if let issuer { authorityKeyIdentifier(of: issuer) }
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: issuer?.certificate.subject ?? subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuer?.privateKey ?? key))
        return try TestCertificate(name: name, certificate: certificate, privateKey: key)
    }

    /// A leaf; self-signed when `issuer` is nil (then without KeyUsage, so OpenSSL accepts it as its own issuer).
    private static func makeLeaf(name: String, commonName: String, names: [GeneralName], issuer: TestCertificate?,
                                 notBefore: Date = Date() - 3600, notAfter: Date = Date() + 30 * 86_400,
                                 usage: ExtendedKeyUsage.Usage = .serverAuth) throws -> TestCertificate {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName(commonName) }
        let publicKey = Certificate.PublicKey(key.publicKey)
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            if issuer != nil { Critical(KeyUsage(digitalSignature: true)) }
            try ExtendedKeyUsage([usage])
            SubjectKeyIdentifier(hash: publicKey)
            if !names.isEmpty { SubjectAlternativeNames(names) }
            if let issuer { authorityKeyIdentifier(of: issuer) }
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: issuer?.certificate.subject ?? subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuer?.privateKey ?? key))
        return try TestCertificate(name: name, certificate: certificate, privateKey: key)
    }

    private static func authorityKeyIdentifier(of issuer: TestCertificate) -> AuthorityKeyIdentifier {
        let ski = try? issuer.certificate.extensions.subjectKeyIdentifier
        return AuthorityKeyIdentifier(keyIdentifier: ski?.keyIdentifier)
    }
}
