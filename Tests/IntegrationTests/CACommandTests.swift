import Foundation
import ProxyServer
import ProxyTestSupport
import Testing
import X509

/// Issue 5: `hookproxy ca [path|pem|fingerprint] --ca-dir DIR` and what `hookproxy run` does with a broken CA, through
/// the real binary (.build/debug/hookproxy). Every CA lives in a temporary directory, never ~/.hookproxy.
@Suite("hookproxy ca (issue 5)", .timeLimit(.minutes(2)))
struct CACommandTests {
    var executable: String {
        get throws {
            guard let executable = Hooks.executable else {
                throw TestSupportError("the hookproxy binary is not built (.build/debug/hookproxy); run swift build")
            }
            return executable
        }
    }

    /// FileHandle.standardOutput.write crashed (SIGILL, "'try!' expression unexpectedly raised an error") when
    /// stdout was closed; the line is dropped now and the command still does its work.
    @Test("ca path with stdout closed: the CA is made and the command exits 0")
    func closedStandardOutput() async throws {
        let directory = try TemporaryDirectory()
        let caDirectory = directory.path + "/ca"
        let result = try await Hooks.run("/bin/sh", ["-c", "exec \"$0\" ca path --ca-dir \"$1\" >&-", try executable, caDirectory])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: caDirectory + "/" + CertificateAuthority.certificateFile))
    }

    @Test("ca path|pem|fingerprint create the CA (mode 0600) once and print it; the fingerprint matches openssl")
    func pathPemFingerprint() async throws {
        let directory = try TemporaryDirectory()
        let caDirectory = directory.path + "/ca"
        let path = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", caDirectory])
        #expect(path.exitCode == 0, "\(path.stderr)")
        let certificatePath = caDirectory + "/" + CertificateAuthority.certificateFile
        let keyPath = caDirectory + "/" + CertificateAuthority.keyFile
        #expect(path.stdout == certificatePath + "\n")
        #expect(try InterceptionTests.mode(certificatePath) == 0o600)
        #expect(try InterceptionTests.mode(keyPath) == 0o600)
        let fileText = try String(contentsOfFile: certificatePath, encoding: .utf8)
        let keyText = try String(contentsOfFile: keyPath, encoding: .utf8)
        #expect(!path.stdout.contains("PRIVATE KEY") && !path.stderr.contains("PRIVATE KEY"))

        let pem = try await Hooks.run(try executable, ["ca", "pem", "--ca-dir", caDirectory])
        #expect(pem.exitCode == 0, "\(pem.stderr)")
        #expect(pem.stdout.hasPrefix("-----BEGIN CERTIFICATE-----\n"), "\(pem.stdout)")
        #expect(pem.stdout.hasSuffix("-----END CERTIFICATE-----\n"), "\(pem.stdout)")
        #expect(pem.stdout.trimmingCharacters(in: .newlines) == fileText.trimmingCharacters(in: .newlines))
        #expect(!pem.stdout.contains("PRIVATE KEY"))
        let certificate = try Certificate(pemEncoded: pem.stdout)
        #expect(certificate.subject == certificate.issuer)
        #expect(certificate.subject.description.contains("hookproxy"), "\(certificate.subject)")

        let bare = try await Hooks.run(try executable, ["ca", "--ca-dir", caDirectory])
        #expect(bare.stdout == pem.stdout, "pem is the default")

        let fingerprint = try await Hooks.run(try executable, ["ca", "fingerprint", "--ca-dir", caDirectory])
        #expect(fingerprint.exitCode == 0, "\(fingerprint.stderr)")
        let printed = fingerprint.stdout.trimmingCharacters(in: .newlines)
        #expect(printed.range(of: "^([0-9A-F]{2}:){31}[0-9A-F]{2}$", options: .regularExpression) != nil, "\(printed)")
        // Independently: openssl x509 -outform der | sha256.
        let openssl = try await Hooks.run("/bin/sh", ["-c",
            "openssl x509 -in '\(certificatePath)' -outform der | openssl dgst -sha256 -r"])
        #expect(openssl.exitCode == 0, "\(openssl.stderr)")
        let hex = openssl.stdout.split(separator: " ").first.map(String.init) ?? ""
        let expected = stride(from: 0, to: hex.count, by: 2).map { offset -> String in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return hex[start..<hex.index(start, offsetBy: 2)].uppercased()
        }.joined(separator: ":")
        #expect(hex.count == 64, "\(openssl.stdout)")
        #expect(printed == expected)

        // Loaded, not re-created: the files are untouched by the later runs.
        #expect(try String(contentsOfFile: certificatePath, encoding: .utf8) == fileText)
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == keyText)
        let again = try await Hooks.run(try executable, ["ca", "fingerprint", "--ca-dir", caDirectory])
        #expect(again.stdout == fingerprint.stdout)
    }

    @Test("the in-process CA agrees with the command: same path, PEM and fingerprint")
    func inProcessAgrees() async throws {
        let directory = try TemporaryDirectory()
        let ca = try CertificateAuthority.loadOrCreate(directory: directory.path)
        let fingerprint = try await Hooks.run(try executable, ["ca", "fingerprint", "--ca-dir", directory.path])
        #expect(fingerprint.stdout == ca.fingerprint + "\n")
        let path = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
        #expect(path.stdout == ca.certificatePath + "\n")
    }

    @Test("a broken key: ca and run exit 1 with a clear message, and the broken file is left untouched")
    func brokenKey() async throws {
        let directory = try TemporaryDirectory()
        let created = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
        #expect(created.exitCode == 0, "\(created.stderr)")
        let keyPath = directory.path + "/" + CertificateAuthority.keyFile
        let certificatePath = directory.path + "/" + CertificateAuthority.certificateFile
        let broken = "-----BEGIN EC PRIVATE KEY-----\nnot a key\n-----END EC PRIVATE KEY-----\n"
        try directory.write(broken, to: CertificateAuthority.keyFile, permissions: 0o600)
        let certificateText = try String(contentsOfFile: certificatePath, encoding: .utf8)

        for show in ["path", "pem", "fingerprint"] {
            let ca = try await Hooks.run(try executable, ["ca", show, "--ca-dir", directory.path])
            #expect(ca.exitCode == 1, "\(ca.stdout)")
            #expect(ca.stdout.isEmpty, "\(ca.stdout)")
            #expect(ca.stderr.contains(keyPath), "\(ca.stderr)")
            #expect(ca.stderr.contains("not a P-256 private key"), "\(ca.stderr)")
        }
        let run = try await Hooks.run(try executable, ["run", "--listen", "127.0.0.1:0", "--ca-dir", directory.path],
                                      timeout: .seconds(20))
        #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
        #expect(!run.stdout.contains("listening"), "\(run.stdout)")
        #expect(run.stderr.contains(keyPath), "\(run.stderr)")
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == broken, "the broken key is left as it was")
        #expect(try String(contentsOfFile: certificatePath, encoding: .utf8) == certificateText)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(left == [CertificateAuthority.certificateFile, CertificateAuthority.keyFile].sorted(), "\(left)")
    }

    @Test("a broken certificate or a missing half is an error, never a silent new CA")
    func brokenCertificateOrIncomplete() async throws {
        let directory = try TemporaryDirectory()
        _ = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
        let keyPath = directory.path + "/" + CertificateAuthority.keyFile
        let certificatePath = directory.path + "/" + CertificateAuthority.certificateFile
        let keyText = try String(contentsOfFile: keyPath, encoding: .utf8)

        try directory.write("garbage\n", to: CertificateAuthority.certificateFile, permissions: 0o600)
        let brokenCertificate = try await Hooks.run(try executable, ["ca", "pem", "--ca-dir", directory.path])
        #expect(brokenCertificate.exitCode == 1)
        #expect(brokenCertificate.stderr.contains(certificatePath), "\(brokenCertificate.stderr)")
        #expect(try String(contentsOfFile: certificatePath, encoding: .utf8) == "garbage\n")
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == keyText)

        try FileManager.default.removeItem(atPath: certificatePath)
        let incomplete = try await Hooks.run(try executable, ["ca", "pem", "--ca-dir", directory.path])
        #expect(incomplete.exitCode == 1)
        #expect(incomplete.stderr.contains("incomplete"), "\(incomplete.stderr)")
        #expect(incomplete.stderr.contains(CertificateAuthority.certificateFile), "\(incomplete.stderr)")
        #expect(!FileManager.default.fileExists(atPath: certificatePath), "no new certificate was made up")
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == keyText)

        let run = try await Hooks.run(try executable, ["run", "--listen", "127.0.0.1:0", "--ca-dir", directory.path],
                                      timeout: .seconds(20))
        #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("incomplete"), "\(run.stderr)")
    }

    @Test("a key belonging to another certificate is an error")
    func mismatchedPair() async throws {
        let first = try TemporaryDirectory(), second = try TemporaryDirectory()
        _ = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", first.path])
        _ = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", second.path])
        let otherKey = try String(contentsOfFile: second.path + "/" + CertificateAuthority.keyFile, encoding: .utf8)
        try first.write(otherKey, to: CertificateAuthority.keyFile, permissions: 0o600)
        let result = try await Hooks.run(try executable, ["ca", "fingerprint", "--ca-dir", first.path])
        #expect(result.exitCode == 1)
        #expect(result.stderr.contains("does not belong to"), "\(result.stderr)")
    }

    @Test("a --ca-dir others can write to, or owned by another user, is refused by ca and run; 0700 works (issue 11, 18c)")
    func unsafeDirectoryRefused() async throws {
        let directory = try TemporaryDirectory()
        let caDirectory = directory.path + "/ca"
        try FileManager.default.createDirectory(atPath: caDirectory, withIntermediateDirectories: false)
        #expect(chmod(caDirectory, 0o777) == 0)

        for show in ["path", "pem"] {
            let ca = try await Hooks.run(try executable, ["ca", show, "--ca-dir", caDirectory])
            #expect(ca.exitCode == 1, "\(ca.stdout)")
            #expect(ca.stdout.isEmpty, "\(ca.stdout)")
            #expect(ca.stderr.contains("the CA directory \(caDirectory) is group- or world-writable (mode 777)"),
                    "\(ca.stderr)")
            #expect(ca.stderr.contains("chmod 700 \(caDirectory)"), "\(ca.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: caDirectory).isEmpty, "no CA was written there")
        let run = try await Hooks.run(try executable, ["run", "--listen", "127.0.0.1:0", "--ca-dir", caDirectory],
                                      timeout: .seconds(20))
        #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
        #expect(!run.stdout.contains("listening"), "\(run.stdout)")
        #expect(run.stderr.contains("chmod 700 \(caDirectory)"), "\(run.stderr)")
        // Group-writable alone is refused too.
        #expect(chmod(caDirectory, 0o770) == 0)
        let group = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", caDirectory])
        #expect(group.exitCode == 1 && group.stderr.contains("(mode 770)"), "\(group.stderr)")

        #expect(chmod(caDirectory, 0o700) == 0)
        let fixed = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", caDirectory])
        #expect(fixed.exitCode == 0, "\(fixed.stderr)")
        #expect(fixed.stdout == caDirectory + "/" + CertificateAuthority.certificateFile + "\n")

        // Owned by someone else (only root can give a directory away).
        if geteuid() == 0 {
            #expect(chown(caDirectory, 65534, 65534) == 0)
            let foreign = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", caDirectory])
            #expect(foreign.exitCode == 1)
            #expect(foreign.stderr.contains("the CA directory \(caDirectory) belongs to another user"), "\(foreign.stderr)")
            let foreignRun = try await Hooks.run(try executable, ["run", "--listen", "127.0.0.1:0", "--ca-dir", caDirectory],
                                                 timeout: .seconds(20))
            #expect(foreignRun.exitCode == 1 && foreignRun.stderr.contains("belongs to another user"), "\(foreignRun.stderr)")
        }
    }

    @Test("a CA certificate that cannot sign leaves clients accept (not a CA, expired, not yet valid) is refused, saying why")
    func unusableCertificate() throws {
        let cases: [(TestCertificate, String)] = [
            (TestCA.shared.selfSigned, "is not a CA certificate"),
            (try TestCA.shared.ca(notBefore: Date() - 30 * 86_400, notAfter: Date() - 86_400), "expired on"),
            (try TestCA.shared.ca(notBefore: Date() + 86_400, notAfter: Date() + 30 * 86_400), "is not valid before"),
        ]
        for (certificate, reason) in cases {
            let directory = try TemporaryDirectory()
            try directory.write(certificate.pem, to: CertificateAuthority.certificateFile, permissions: 0o600)
            try directory.write(certificate.privateKeyPEM, to: CertificateAuthority.keyFile, permissions: 0o600)
            do {
                _ = try CertificateAuthority.loadOrCreate(directory: directory.path)
                Issue.record("\(certificate.name): a CA that no client can accept was loaded (\(reason))")
            } catch {
                #expect(error.description.contains(reason), "\(error)")
                #expect(error.description.contains(directory.path + "/" + CertificateAuthority.certificateFile), "\(error)")
                #expect(error.description.contains("remove both CA files"), "\(error)")
            }
        }
    }

    @Test("a CA key other users can read is refused by ca and run until chmod 600")
    func readableKey() async throws {
        let directory = try TemporaryDirectory()
        let created = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
        #expect(created.exitCode == 0, "\(created.stderr)")
        let keyPath = directory.path + "/" + CertificateAuthority.keyFile
        for mode: mode_t in [0o644, 0o640] {
            #expect(chmod(keyPath, mode) == 0)
            let ca = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
            #expect(ca.exitCode == 1, "mode \(String(mode, radix: 8)): \(ca.stdout)")
            #expect(ca.stderr.contains("chmod 600 \(keyPath)"), "\(ca.stderr)")
        }
        let run = try await Hooks.run(try executable, ["run", "--listen", "127.0.0.1:0", "--ca-dir", directory.path],
                                      timeout: .seconds(20))
        #expect(run.exitCode == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("can be read by other users"), "\(run.stderr)")
        #expect(chmod(keyPath, 0o600) == 0)
        let fixed = try await Hooks.run(try executable, ["ca", "path", "--ca-dir", directory.path])
        #expect(fixed.exitCode == 0, "\(fixed.stderr)")
    }

    @Test("the in-process check: CertificateAuthority.loadOrCreate refuses a 0777 directory, accepts a 0700 one")
    func unsafeDirectoryInProcess() throws {
        let directory = try TemporaryDirectory()
        #expect(chmod(directory.path, 0o777) == 0)
        #expect(throws: CAError.self) { try CertificateAuthority.loadOrCreate(directory: directory.path) }
        do {
            _ = try CertificateAuthority.loadOrCreate(directory: directory.path)
        } catch {
            #expect(error.description.contains("chmod 700 \(directory.path)"), "\(error)")
        }
        #expect(chmod(directory.path, 0o700) == 0)
        let ca = try CertificateAuthority.loadOrCreate(directory: directory.path)
        #expect(ca.certificatePath == directory.path + "/" + CertificateAuthority.certificateFile)
    }
}
