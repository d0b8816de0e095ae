import Foundation
import ProxyServer
import ProxyTestSupport
import Testing
import X509

/// The words hookproxy uses when the CA or `--reverse-cert` cannot be read, and the dates it names for an unusable
/// CA: as Foundation's NSError and ISO8601DateFormatter put them (pinned when hookproxy stopped using Foundation),
/// except for a directory, of which NSError said only "(NSCocoaErrorDomain error 256.)".
@Suite("file read messages", .timeLimit(.minutes(1)))
struct FileReadMessageTests {
    /// A CA directory whose certificate file is `certificate` (bytes or a directory) beside a key file.
    static func caFailure(certificate: [UInt8]?) throws -> (String, TemporaryDirectory) {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o700)
        if let certificate {
            _ = try directory.write(certificate, to: CertificateAuthority.certificateFile, permissions: 0o600)
        } else {
            mkdir(directory.path + "/" + CertificateAuthority.certificateFile, 0o700)
        }
        _ = try directory.write("x", to: CertificateAuthority.keyFile, permissions: 0o600)
        do {
            _ = try CertificateAuthority.loadOrCreate(directory: directory.path)
            return ("loaded", directory)
        } catch {
            return (error.description, directory)
        }
    }

    @Test("a CA file that is not UTF-8, or is a directory")
    func caFiles() throws {
        let (notText, first) = try Self.caFailure(certificate: [0xFF, 0xFE, 0x41])
        #expect(notText == "hookproxy: cannot read the CA in \(first.path): The operation could not be completed. The file isn’t in the correct format.")
        let (folder, second) = try Self.caFailure(certificate: nil)
        #expect(folder == "hookproxy: cannot read the CA in \(second.path): \(second.path)/\(CertificateAuthority.certificateFile) is a directory")
    }

    @Test("--reverse-cert that is missing, not UTF-8, or a directory", arguments: ["missing", "binary", "directory"])
    func reverseCertificate(_ kind: String) async throws {
        let directory = try TemporaryDirectory()
        let path: String, reason: String
        switch kind {
        case "missing": (path, reason) = (directory.path + "/nope.pem", "The file doesn’t exist.")
        case "binary": (path, reason) = (try directory.write([0xFF, 0xFE, 0x41], to: "b.pem"), "The file isn’t in the correct format.")
        default: (path, reason) = (directory.path, "it is a directory")
        }
        let failure = await startFailure { configuration in
            configuration.reverseRoutes = [try! ReverseRoute(parsing: "127.0.0.1:0=https://localhost:1")]
            configuration.reverseCertificatePath = path
            configuration.caDirectory = directory.path + "/ca"
        }
        #expect(failure == "hookproxy: --reverse-cert \(path): cannot read it: \(reason) (the file must hold PEM certificates, the server's first, and its unencrypted private key)")
    }

    @Test("an expired or not yet valid CA is named with its dates as ISO8601DateFormatter wrote them")
    func caDates() throws {
        let formatter = ISO8601DateFormatter()
        let past = Date(timeIntervalSince1970: 1_000_000_000)  // 2001-09-09T01:46:40Z
        let future = Date(timeIntervalSince1970: 4_102_444_800.75)  // 2100-01-01, a fraction past
        for (certificate, date, words) in [
            (try TestCA.shared.ca(notBefore: past - 86_400, notAfter: past), past, "expired on"),
            (try TestCA.shared.ca(notBefore: future, notAfter: future + 86_400), future, "is not valid before"),
        ] {
            let directory = try TemporaryDirectory()
            _ = try directory.write(certificate.pem, to: CertificateAuthority.certificateFile, permissions: 0o600)
            _ = try directory.write(certificate.privateKeyPEM, to: CertificateAuthority.keyFile, permissions: 0o600)
            do {
                _ = try CertificateAuthority.loadOrCreate(directory: directory.path)
                Issue.record("loaded a CA that \(words) \(date)")
            } catch {
                let stored = words == "expired on" ? certificate.certificate.notValidAfter : certificate.certificate.notValidBefore
                let text = "\(words) \(formatter.string(from: stored))"
                #expect(error.description.contains(text + ",") || error.description.contains(text + " ("), "\(error)")
            }
        }
    }

    /// The CA directory cannot be made (/sys takes no new directories, root or not): the system's words, not a
    /// CocoaError's domain, code and user-info dictionary (whose order changed from run to run).
    @Test("a CA directory that cannot be made is refused with the system's words")
    func caDirectoryNotMade() {
        let directory = "/sys/hookproxy-test-\(UInt32.random(in: 0...UInt32.max))/ca"
        do {
            _ = try CertificateAuthority.loadOrCreate(directory: directory)
            Issue.record("made a CA in \(directory)")
        } catch {
            let prefix = "hookproxy: cannot create a CA in \(directory): "
            #expect(error.description.hasPrefix(prefix), "\(error)")
            let words = error.description.dropFirst(prefix.count)
            #expect(!words.contains("Domain") && !words.contains("UserInfo") && !words.isEmpty, "\(error)")
        }
    }
}
