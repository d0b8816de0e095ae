import Foundation
import ProxyTestSupport
import Testing

/// `hookproxy pin HOST:PORT [--cacert FILE]`, run as the built binary against a TLS TestOrigin presenting [L, I].
/// The expected pins are computed independently: by the openssl CLI from each certificate's SubjectPublicKeyInfo,
/// and by TestCA from the key it generated.
@Suite("hookproxy pin", .timeLimit(.minutes(2)))
struct PinCommandTests {
    static let ca = TestCA.shared

    /// The values after `label:` on the output's lines, in order (e.g. every `pin:`).
    static func values(_ label: String, in output: String) -> [String] {
        output.split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix(label + ":") else { return nil }
            return trimmed.dropFirst(label.count + 1).trimmingCharacters(in: .whitespaces)
        }
    }

    /// `sha256//BASE64` of the certificate's SubjectPublicKeyInfo DER, by the openssl command line.
    static func opensslPin(_ certificate: TestCertificate, in directory: TemporaryDirectory) async throws -> String {
        let file = try directory.writePEM([certificate], to: "\(certificate.name)-for-openssl.pem")
        let script = "openssl x509 -in '\(file)' -pubkey -noout | openssl pkey -pubin -outform DER"
            + " | openssl dgst -sha256 -binary | openssl base64 -A"
        let result = try await Hooks.run("/bin/sh", ["-c", script])
        #expect(result.exitCode == 0, "\(result.stderr)")
        return "sha256//" + result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func executable() throws -> String {
        try #require(Hooks.executable, "build hookproxy first (swift build): \(Hooks.repositoryRoot)/.build/debug/hookproxy")
    }

    @Test("pin prints each presented certificate's SPKI pin, equal to the independently computed ones")
    func pinsMatch() async throws {
        let hookproxy = try executable()
        let L = Self.ca.leaf, I = Self.ca.intermediate
        try await withOrigin(tls: Self.ca.identity([L, I])) { origin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([Self.ca.root], to: "root.pem")
            let expected = [try await Self.opensslPin(L, in: directory), try await Self.opensslPin(I, in: directory)]
            #expect(expected == [L.spkiPin, I.spkiPin], "openssl and TestCA agree on the pins")

            let run = try await Hooks.run(hookproxy, ["pin", "127.0.0.1:\(origin.port)", "--cacert", root])
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(Self.values("pin", in: run.stdout) == expected, "\(run.stdout)")
            let fingerprints = [L, I].map { certificate in
                certificate.sha256Hex.uppercased().chunked(2).joined(separator: ":")
            }
            #expect(Self.values("sha256", in: run.stdout) == fingerprints, "\(run.stdout)")
            let subjects = Self.values("subject", in: run.stdout)
            #expect(subjects.count == 2)
            #expect(subjects.first?.contains("CN=localhost") == true, "\(subjects)")
            #expect(subjects.last?.contains("CN=hookproxy test intermediate I") == true, "\(subjects)")
            #expect(Self.values("issuer", in: run.stdout).first?.contains("CN=hookproxy test intermediate I") == true)
            #expect(Self.values("not before", in: run.stdout).count == 2)
            #expect(Self.values("not after", in: run.stdout).count == 2)
            #expect(run.stdout.contains("verifies against \(root): yes"), "\(run.stdout)")
            // The snippet is ready to paste: a trust rule with the printed pins.
            #expect(run.stdout.contains("pinning: public_key"), "\(run.stdout)")
            for pin in expected { #expect(run.stdout.contains("\"\(pin)\"")) }
            #expect(origin.requests.isEmpty, "pin sends no request")
        }
    }

    @Test("pin without --cacert: the chain does not verify against the system store, and still prints it")
    func noCACert() async throws {
        let hookproxy = try executable()
        try await withOrigin(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            let run = try await Hooks.run(hookproxy, ["pin", "127.0.0.1:\(origin.port)"])
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(run.stdout.contains("verifies against the system store: no"), "\(run.stdout)")
            #expect(Self.values("pin", in: run.stdout) == [Self.ca.leaf.spkiPin, Self.ca.intermediate.spkiPin])
        }
    }

    @Test("pin with --servername checks that name: localhost verifies, other.invalid does not")
    func serverName() async throws {
        let hookproxy = try executable()
        try await withOrigin(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([Self.ca.root], to: "root.pem")
            let good = try await Hooks.run(
                hookproxy, ["pin", "127.0.0.1:\(origin.port)", "--cacert", root, "--servername", "localhost"])
            #expect(good.exitCode == 0, "\(good.stderr)")
            #expect(good.stdout.contains(": yes"), "\(good.stdout)")
            let bad = try await Hooks.run(
                hookproxy, ["pin", "127.0.0.1:\(origin.port)", "--cacert", root, "--servername", "other.invalid"])
            #expect(bad.exitCode == 0, "\(bad.stderr)")
            #expect(bad.stdout.contains(": no"), "\(bad.stdout)")
        }
    }

    @Test("pin prints no pin for a certificate the server sends beside the chain: it could never match",
          arguments: [true, false])
    func extraCertificateSkipped(verifies: Bool) async throws {
        let hookproxy = try executable()
        let L = Self.ca.leaf, I = Self.ca.intermediate, S = Self.ca.selfSigned
        // S (self-signed, unrelated) is presented after the real chain: neither on the chain that verifies against
        // R (with --cacert) nor on the leaf's signed path (without: what allow_invalid_certificates counts).
        try await withOrigin(tls: Self.ca.identity([L, I, S])) { origin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([Self.ca.root], to: "root.pem")
            let run = try await Hooks.run(hookproxy, ["pin", "127.0.0.1:\(origin.port)"] + (verifies ? ["--cacert", root] : []))
            #expect(run.exitCode == 0, "\(run.stderr)")
            #expect(run.stdout.contains(verifies ? ": yes" : ": no"), "\(run.stdout)")
            #expect(Self.values("pin", in: run.stdout) == [L.spkiPin, I.spkiPin], "\(run.stdout)")
            #expect(!run.stdout.contains(S.spkiPin), "the snippet pins S: \(run.stdout)")
            // S is still listed, in the order presented, with the reason it has no pin.
            #expect(Self.values("subject", in: run.stdout).count == 3, "\(run.stdout)")
            let skipped = Self.values("skipped", in: run.stdout)
            #expect(skipped.count == 1, "\(run.stdout)")
            #expect(skipped.first?.contains(verifies ? "not on the chain that verifies against \(root)" : "signs neither the leaf") == true,
                    "\(skipped)")
            #expect(skipped.first?.contains("never matches") == true, "\(skipped)")
        }
    }

    @Test("pin against an unreachable port: exit 1 with a clear message")
    func unreachable() async throws {
        let hookproxy = try executable()
        let refusing = try Hooks.closedPort()
        let port = refusing.port
        let run = try await Hooks.run(hookproxy, ["pin", "127.0.0.1:\(port)"])
        withExtendedLifetime(refusing) {}
        #expect(run.exitCode == 1)
        #expect(run.stderr.contains("cannot reach 127.0.0.1:\(port)"), "\(run.stderr)")
        #expect(run.stdout.isEmpty, "\(run.stdout)")
    }
}

extension String {
    /// The string cut into pieces of `size` characters.
    func chunked(_ size: Int) -> [String] {
        var pieces: [String] = []
        var index = startIndex
        while index < endIndex {
            let end = self.index(index, offsetBy: size, limitedBy: endIndex) ?? endIndex
            pieces.append(String(self[index..<end]))
            index = end
        }
        return pieces
    }
}
