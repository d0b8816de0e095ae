import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `on_redirect: follow` against servers that redirect where no hop should go, or never finish a 3xx.
@Suite("on_redirect: hostile redirects", .timeLimit(.minutes(2)))
struct RedirectEdgeTests {
    static let follow = RedirectHookTests.rule("{ action: follow }")

    @Test("a followed hop to hookproxy's own address never reaches the traffic viewer's API",
          arguments: ["127.0.0.1", "localhost"])
    func hopToOwnViewer(host: String) async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let rules = try Hooks.store(directory, Self.follow)
            try await withHookProxy(rules: rules, { $0.viewer = ViewerSettings() }) { proxy in
                // A first exchange, so the flow list holds something to leak.
                let first = try await Hooks.curl(proxy, "\(origin.baseURL)/echo?secret=flow-one")
                #expect(first.status == 200)
                let location = "http://\(host):\(proxy.port)/api/flows"
                let escaped = location.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? location
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=\(escaped)")
                #expect(!response.bodyText.contains("secret=flow-one"), "the server's redirect read the flow list")
                #expect(response.status == 508)
                #expect(response.bodyText.contains("loop detected"))
            }
        }
    }
}
