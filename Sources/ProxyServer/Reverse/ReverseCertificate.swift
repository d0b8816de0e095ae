import FoundationEssentials
import Glibc
import NIOSSL

/// `--reverse-cert FILE`: the certificate and key every TLS reverse listener presents instead of a leaf minted by
/// hookproxy's CA.
///
/// The file is PEM and holds, in any order: the server certificate, then any intermediates (the chain is sent in the
/// order the certificates appear, so the server certificate must come first among them), and one unencrypted
/// private key matching the server certificate (`BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or
/// `BEGIN EC PRIVATE KEY`). `cat server.pem intermediate.pem server.key > reverse.pem` makes one.
enum ReverseCertificate {
    /// Reads and checks `path`, and returns the TLS server context that presents it.
    static func serverContext(path: String) throws(ReverseCertificateError) -> NIOSSLContext {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ReverseCertificateError(path, "cannot read it: \(FileReadFailure.reason(error, path: path) ?? "it is a directory")")
        }
        guard text.contains("-----BEGIN CERTIFICATE-----") else {
            throw ReverseCertificateError(path, "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(Array(text.utf8))
        } catch {
            throw ReverseCertificateError(path, "a certificate in it is not valid PEM: \(error)")
        }
        guard !chain.isEmpty else {
            throw ReverseCertificateError(path, "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED") {
            throw ReverseCertificateError(path, "its private key is encrypted; decrypt it first (openssl pkey -in KEY -out KEY.plain)")
        }
        guard let keyPEM = privateKeyBlock(in: text) else {
            throw ReverseCertificateError(path, "it holds no PEM private key (-----BEGIN PRIVATE KEY-----); append the key to the certificates")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        } catch {
            throw ReverseCertificateError(path, "its private key cannot be read: \(error)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.applicationProtocols = NegotiatedPipeline.offeredProtocols  // as a minted leaf's listener
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ReverseCertificateError(path, "the private key does not match the first certificate, or the pair is unusable: \(error)")
        }
    }

    /// The first `-----BEGIN …PRIVATE KEY-----` block through its END line.
    private static func privateKeyBlock(in text: String) -> String? {
        guard let begin = text.firstRange(of: #/-----BEGIN ([A-Z]+ )?PRIVATE KEY-----/#),
              let end = text[begin.upperBound...].firstRange(of: #/-----END ([A-Z]+ )?PRIVATE KEY-----/#)
        else { return nil }
        return String(text[begin.lowerBound..<end.upperBound]) + "\n"
    }
}

/// `--reverse-cert` cannot be used: the message names the file and says what it must hold.
public struct ReverseCertificateError: Error, CustomStringConvertible {
    public let description: String

    init(_ path: String, _ reason: String) {
        description = "hookproxy: --reverse-cert \(path): \(reason) (the file must hold PEM certificates, the server's first, and its unencrypted private key)"
    }
}
