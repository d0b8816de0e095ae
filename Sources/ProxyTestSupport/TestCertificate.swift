import Crypto
import Foundation
import X509

/// One generated certificate with its private key, in every form tests need. Any thread (immutable).
public struct TestCertificate: Sendable {
    /// The short name used in TRUST-CASES.md (`R`, `I`, `L`, `W`, `E`, `U`, `UL`, `S`, `N`, `CCA`, `C`).
    public let name: String
    public let certificate: Certificate
    /// The certificate's DER.
    public let der: [UInt8]
    /// The certificate as one PEM block (`-----BEGIN CERTIFICATE-----`).
    public let pem: String
    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    public let privateKeyPEM: String
    /// The DER of the certificate's SubjectPublicKeyInfo.
    public let spkiDER: [UInt8]

    let privateKey: P256.Signing.PrivateKey

    init(name: String, certificate: Certificate, privateKey: P256.Signing.PrivateKey) throws {
        self.name = name
        self.certificate = certificate
        self.privateKey = privateKey
        let document = try certificate.serializeAsPEM()
        self.der = document.derBytes
        self.pem = document.pemString + "\n"
        self.privateKeyPEM = privateKey.pemRepresentation + "\n"
        self.spkiDER = Array(privateKey.publicKey.derRepresentation)
    }

    /// The SPKI pin in curl's form: `sha256//` + base64 of SHA-256 over the SubjectPublicKeyInfo DER.
    public var spkiPin: String {
        "sha256//" + Data(SHA256.hash(data: spkiDER)).base64EncodedString()
    }

    /// SHA-256 of the certificate's DER, as lower-case hex.
    public var sha256Hex: String {
        SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
    }

    /// The subject as RFC 4514 text (e.g. `CN=hookproxy test leaf L`).
    public var subject: String { certificate.subject.description }
}
