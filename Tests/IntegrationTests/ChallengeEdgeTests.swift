import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `on_challenge: use_credential` against servers that never stop asking.
@Suite("on_challenge: hostile challenges", .timeLimit(.minutes(2)))
struct ChallengeEdgeTests {
    @Test("a server that marks its Digest nonce stale on every answer gets a few rounds, not thousands")
    func staleDigestForever() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let rules = try Hooks.store(directory, ChallengeHookTests.useCredential())
            try await withHookProxy(rules: rules) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/auth/digest?user=a&pass=b&stale=1")
                // The first request and 4 answers (CurlTransfer.maxAuthRounds); libcurl alone sent over a thousand.
                #expect(origin.requests.count <= 5, "\(origin.requests.count) requests")
                #expect(response.status == 502)
                #expect(response.bodyText.contains("challenge failed"), "\(response.bodyText.prefix(300))")
                #expect(response.bodyText.contains("asked for credentials again"))
            }
        }
    }
}
