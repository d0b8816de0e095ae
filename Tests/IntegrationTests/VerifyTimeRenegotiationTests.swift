import Foundation
import ProxyTestSupport
import Testing

/// `--verify-time` without a `trust` rule: curl verifies, through an OpenSSL verify callback whose context is the
/// transfer that opened the connection. A server renegotiating on that connection once curl reused it for a later
/// request called back into the first transfer, already freed (found by a review helper: a use after free that
/// segfaulted the proxy when the memory had been reused). Such a connection now refuses to renegotiate, as one
/// verified under a `trust` rule always did.
///
/// The path needs a server the system trusts: the real binary runs in a private mount namespace where the test
/// CA's root is bind-mounted over the system bundle (root and `unshare` needed; skipped without them).
@Suite("--verify-time and a renegotiating server", .timeLimit(.minutes(2)))
struct VerifyTimeRenegotiationTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/renegotiation.py").path
    static let systemBundle = "/etc/ssl/certs/ca-certificates.crt"

    /// Whether this run may swap the system CA bundle in a private mount namespace.
    static let canSwapSystemTrust = PrivateMounts.available(needing: [systemBundle, "/usr/bin/openssl"])

    @Test("the reused connection refuses the server's renegotiation, and the proxy lives on",
          .enabled(if: canSwapSystemTrust, "needs root and unshare to trust a test CA as the system does"))
    func renegotiationIsRefused() async throws {
        let binary = try #require(Hooks.executable, "the hookproxy binary is not built (.build/debug/hookproxy)")
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let anchor = try directory.writePEM([ca.root], to: "ca.pem")
        _ = try directory.writePEM([ca.leaf], to: "leaf.pem")
        _ = try directory.writePEM([ca.intermediate], to: "chain.pem")
        _ = try directory.write(ca.leaf.privateKeyPEM, to: "leaf.key")
        let command = "mount --bind '\(anchor)' \(Self.systemBundle) && exec /usr/bin/python3 '\(Self.script)' '\(binary)' '\(directory.path)'"
        let run = try await Hooks.run("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", command],
                                      timeout: .seconds(90))
        let line = try #require(run.stdout.split(separator: "\n").last, "no output: \(run.stderr)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(out["first_response"] as? String == "HTTP/1.1 200 OK", "curl trusted the server: \(out)")
        #expect(out["second_request_seen"] as? Bool == true, "the second request went out: \(out)")
        #expect(out["renegotiation_refused"] as? Bool == true, "\(out)")
        #expect(out["proxy_alive"] as? Bool == true, "\(out)")
    }
}
