import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `on_redirect` through real sockets: hookproxy follows hop by hop itself (curl is not asked to), each hop is a
/// FlowRecord of its own and is matched against the rules as its own request.
@Suite("on_redirect", .timeLimit(.minutes(2)))
struct RedirectHookTests {
    /// A rule for every request to 127.0.0.1 with this `on_redirect`.
    static func rule(_ onRedirect: String) -> String {
        """
        rules:
          - name: redirects
            match: { host: "127.0.0.1" }
            on_redirect: \(onRedirect)

        """
    }

    /// Origin, rules (from the origin's port) and proxy, all stopped afterwards.
    func with(_ rules: (TestOrigin) -> String?, limits: ProxyLimits = ProxyLimits(),
              _ body: (TestOrigin, ProxyHarness) async throws -> Void) async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let store = try rules(origin).map { try Hooks.store(directory, $0) }
            try await withHookProxy(rules: store, { $0.limits = limits }) { proxy in
                try await body(origin, proxy)
            }
        }
    }

    // MARK: pass

    @Test("pass (default and explicit): the 3xx goes to the client as it is", arguments: [nil, "{ action: pass }"])
    func pass(onRedirect: String?) async throws {
        try await with({ _ in onRedirect.map(Self.rule) }) { origin, proxy in
            let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=/echo&status=302")
            #expect(response.status == 302)
            #expect(response.header("Location") == "/echo")
            #expect(response.bodyText == "redirecting to /echo\n")
            #expect(origin.requests.map(\.target) == ["/redirect?to=/echo&status=302"])
            let records = await Hooks.records(proxy)
            #expect(records.count == 1)
            #expect(records.first?.hop == 0)
            #expect(!Hooks.eventTexts(records).contains { $0.hasPrefix("redirect") })
        }
    }

    // MARK: follow

    @Test("follow: final bytes, one FlowRecord per hop with its number, `redirect followed 3 hops`")
    func follow() async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect-chain/3")
            #expect(response.status == 200)
            #expect(response.bodyText == "chain done\n")
            #expect(origin.requests.map(\.target) == (0...3).reversed().map { "/redirect-chain/\($0)" })
            let records = await Hooks.records(proxy, count: 4)
            #expect(records.map(\.hop) == [0, 1, 2, 3])
            #expect(records.map { $0.response?.status } == [302, 302, 302, 200])
            #expect(records.map(\.url) == (0...3).reversed().map { "\(origin.baseURL)/redirect-chain/\($0)" })
            // Only the final record says the chain was followed; the hops before carry no redirect verdict.
            #expect(records.dropLast().allSatisfy { !$0.events.contains { $0.hook == .redirect } })
            #expect(records.last?.events.filter { $0.hook == .redirect }.map(\.action) == ["redirect followed 3 hops"])
            #expect(records.allSatisfy { $0.error == nil })
        }
    }

    @Test("follow: a relative Location resolves against the URL it answered",
          arguments: [("echo%3Fx%3D1", "/echo?x=1"), ("./sub/../echo", "/echo"), ("%3Fonly%3Dquery", "/redirect?only=query")])
    func relativeLocation(location: String, expected: String) async throws {
        try await with({ _ in Self.rule("{ action: follow, max_hops: 3 }") }) { origin, proxy in
            let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=\(location)")
            #expect(origin.requests.count >= 2)
            #expect(origin.requests.dropFirst().first?.target == expected)
            if expected.hasPrefix("/echo") {
                #expect(response.status == 200)
                #expect(response.header("X-Target") == expected)
            }
            let records = await Hooks.records(proxy, count: 2)
            #expect(records.map(\.hop).prefix(2) == [0, 1])
            #expect(records.dropFirst().first?.url == "\(origin.baseURL)\(expected)")
        }
    }

    @Test("follow: a scheme-relative Location (//host:port/path) is followed on the same scheme")
    func schemeRelativeLocation() async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let response = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=%2F%2F127.0.0.1%3A\(origin.port)%2Fecho")
            #expect(response.status == 200)
            #expect(origin.requests.last?.target == "/echo")
        }
    }

    @Test("follow: more than max_hops → 502 naming the chain")
    func maxHopsExceeded() async throws {
        try await with({ _ in Self.rule("{ action: follow, max_hops: 2 }") }) { origin, proxy in
            let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect-chain/5")
            #expect(response.status == 502)
            #expect(response.bodyText.hasPrefix("hookproxy: redirect limit"), "\(response.bodyText)")
            #expect(response.bodyText.contains("more than 2 hops"), "\(response.bodyText)")
            for n in [5, 4, 3, 2] {
                #expect(response.bodyText.contains("\(origin.baseURL)/redirect-chain/\(n)"), "\(response.bodyText)")
            }
            // Hops 0, 1, 2 were fetched; the third redirect was refused, /redirect-chain/2 never requested.
            #expect(origin.requests.map(\.target) == ["/redirect-chain/5", "/redirect-chain/4", "/redirect-chain/3"])
            let records = await Hooks.records(proxy, count: 3)
            #expect(records.map(\.hop) == [0, 1, 2])
            #expect(records.last?.error?.hasPrefix("hookproxy: redirect limit") == true)
            #expect(records.last?.events.map(\.action).contains("redirect stopped") == true)
        }
    }

    @Test("follow: a loop → 502 saying so")
    func loop() async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect-loop")
            #expect(response.status == 502)
            #expect(response.bodyText.hasPrefix("hookproxy: redirect loop"), "\(response.bodyText)")
            #expect(response.bodyText.contains("\(origin.baseURL)/redirect-loop"))
            #expect(origin.requests.count < 10, "the loop was detected, not capped by max_hops")
            let records = await Hooks.records(proxy)
            #expect(records.last?.error?.contains("redirect loop") == true)
        }
    }

    @Test("follow: 303 (and 301/302 after POST) become GET without a body", arguments: [303, 301, 302])
    func postBecomesGet(status: Int) async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let response = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=/echo&status=\(status)", ["--data-binary", "the body"])
            #expect(response.status == 200)
            #expect(response.header("X-Method") == "GET")
            #expect(response.body.isEmpty)
            let first = origin.requests.first, last = origin.requests.last
            #expect(first?.method == "POST")
            #expect(first?.body == Array("the body".utf8))
            #expect(origin.requests.count == 2)
            #expect(last?.method == "GET")
            #expect(last?.bodyCount == 0)
            #expect(last?.header("Content-Length") == nil)
            #expect(last?.header("Content-Type") == nil)
            #expect(last?.header("Transfer-Encoding") == nil)
            let records = await Hooks.records(proxy, count: 2)
            #expect(records.map { $0.request.method } == ["POST", "GET"])
        }
    }

    @Test("follow: 307/308 keep method and body", arguments: [(307, "POST"), (308, "POST"), (307, "PUT")])
    func keepMethodAndBody(status: Int, method: String) async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let body = String(repeating: "keep me ", count: 1000)
            let response = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=/echo&status=\(status)",
                ["-X", method, "--data-binary", body, "-H", "Content-Type: text/plain"])
            #expect(response.status == 200)
            #expect(response.header("X-Method") == method)
            #expect(response.bodyText == body)
            #expect(origin.requests.map(\.method) == [method, method])
            #expect(origin.requests.last?.body == Array(body.utf8))
            #expect(origin.requests.last?.header("Content-Type") == "text/plain")
        }
    }

    @Test("follow: a chunked request body is replayed on 307 too")
    func chunkedBodyReplayed() async throws {
        try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
            let response = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=/echo&status=307",
                ["--data-binary", "chunked body", "-H", "Transfer-Encoding: chunked"])
            #expect(response.status == 200)
            #expect(response.bodyText == "chunked body")
            #expect(origin.requests.last?.body == Array("chunked body".utf8))
        }
    }

    @Test("follow: a body over --body-limit cannot be replayed on 307 → 502 saying so; 303 still works")
    func bodyTooLargeToReplay() async throws {
        let limits = ProxyLimits(bodyLimit: 1024)
        let big = String(repeating: "x", count: 8192)
        try await with({ _ in Self.rule("{ action: follow }") }, limits: limits) { origin, proxy in
            let refused = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=/echo&status=307", ["--data-binary", big])
            #expect(refused.status == 502)
            #expect(refused.bodyText.hasPrefix("hookproxy: "), "\(refused.bodyText)")
            #expect(refused.bodyText.contains("body-limit") && refused.bodyText.contains("replay"), "\(refused.bodyText)")
            #expect(origin.requests.map(\.target) == ["/redirect?to=/echo&status=307"], "the 307 was not followed")

            let converted = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=/echo&status=303", ["--data-binary", big])
            #expect(converted.status == 200)
            #expect(converted.header("X-Method") == "GET")
        }
    }

    @Test("follow: Authorization and Cookie are dropped when the origin changes, kept when it does not")
    func crossOriginDropsCredentials() async throws {
        try await withOrigin { other in
            try await with({ _ in Self.rule("{ action: follow }") }) { origin, proxy in
                let credentials = ["-H", "Authorization: Bearer secret-token", "-H", "Cookie: session=abc"]
                let crossTarget = "http%3A%2F%2F127.0.0.1%3A\(other.port)%2Fheaders"
                let cross = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=\(crossTarget)", credentials)
                #expect(cross.status == 200)
                #expect(!cross.bodyText.lowercased().contains("authorization"), "\(cross.bodyText)")
                #expect(!cross.bodyText.lowercased().contains("cookie"), "\(cross.bodyText)")
                #expect(cross.bodyText.contains("Host: 127.0.0.1:\(other.port)\r\n"), "\(cross.bodyText)")
                #expect(other.requests.count == 1)
                #expect(other.requests.first?.header("Authorization") == nil)
                #expect(other.requests.first?.header("Cookie") == nil)
                #expect(origin.requests.first?.header("Authorization") == "Bearer secret-token")

                let same = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=/headers", credentials)
                #expect(same.status == 200)
                #expect(same.bodyText.contains("Authorization: Bearer secret-token\r\n"), "\(same.bodyText)")
                #expect(same.bodyText.contains("Cookie: session=abc\r\n"), "\(same.bodyText)")
            }
        }
    }

    // MARK: block, rewrite, same_host_only

    @Test("block: 502 naming the refused Location; nothing followed")
    func block() async throws {
        try await with({ _ in Self.rule("{ action: block }") }) { origin, proxy in
            let location = "http://tracker.invalid/pixel?id=7"
            let response = try await Hooks.curl(
                proxy, "\(origin.baseURL)/redirect?to=http%3A%2F%2Ftracker.invalid%2Fpixel%3Fid%3D7")
            #expect(response.status == 502)
            #expect(response.bodyText.hasPrefix("hookproxy: redirect blocked"), "\(response.bodyText)")
            #expect(response.bodyText.contains(location), "\(response.bodyText)")
            #expect(origin.requests.count == 1)
            let records = await Hooks.records(proxy)
            #expect(records.count == 1)
            let redirectEvents = records.flatMap(\.events).filter { $0.hook == .redirect }
            #expect(redirectEvents == [HookEvent(hook: .redirect, action: "redirect blocked", detail: location)])
        }
    }

    @Test("rewrite: the client gets the 3xx with its Location rewritten")
    func rewrite() async throws {
        try await withOrigin { other in
            let rule = Self.rule("{ action: rewrite, rewrite: { from: \"https://prod.invalid\", to: \"\(other.baseURL)\" } }")
            try await with({ _ in rule }) { origin, proxy in
                let response = try await Hooks.curl(
                    proxy, "\(origin.baseURL)/redirect?to=https%3A%2F%2Fprod.invalid%2Fv1%2Fitem%3Fq%3D1&status=301")
                #expect(response.status == 301)
                #expect(response.header("Location") == "\(other.baseURL)/v1/item?q=1")
                #expect(other.requests.isEmpty, "rewrite hands the 3xx over, it does not follow")
                let events = await Hooks.records(proxy).flatMap(\.events).filter { $0.hook == .redirect }
                #expect(events.map(\.action) == ["redirect rewritten"])
                #expect(events.first?.detail.contains("https://prod.invalid/v1/item?q=1") == true)

                // A Location the prefix does not match is handed over unchanged.
                let untouched = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=%2Fecho")
                #expect(untouched.header("Location") == "/echo")
            }
        }
    }

    @Test("follow + rewrite: the rewritten Location is the one followed")
    func followRewritten() async throws {
        try await withOrigin { other in
            let rule = Self.rule("{ action: follow, rewrite: { from: \"https://prod.invalid\", to: \"\(other.baseURL)\" } }")
            try await with({ _ in rule }) { origin, proxy in
                let response = try await Hooks.curl(
                    proxy, "\(origin.baseURL)/redirect?to=https%3A%2F%2Fprod.invalid%2Fecho%3Fr%3D1")
                #expect(response.status == 200)
                #expect(response.header("X-Target") == "/echo?r=1")
                #expect(other.requests.map(\.target) == ["/echo?r=1"])
                let records = await Hooks.records(proxy, count: 2)
                #expect(records.map(\.hop) == [0, 1])
                #expect(records.last?.url == "\(other.baseURL)/echo?r=1")
            }
        }
    }

    @Test("same_host_only: another origin's Location goes to the client; the same origin's is followed")
    func sameHostOnly() async throws {
        try await withOrigin { other in
            try await with({ _ in Self.rule("{ action: follow, same_host_only: true }") }) { origin, proxy in
                let away = try await Hooks.curl(
                    proxy, "\(origin.baseURL)/redirect?to=http%3A%2F%2F127.0.0.1%3A\(other.port)%2Fecho")
                #expect(away.status == 302)
                #expect(away.header("Location") == "\(other.baseURL)/echo")
                #expect(other.requests.isEmpty)

                let home = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=%2Fecho")
                #expect(home.status == 200)
                #expect(origin.requests.last?.target == "/echo")
            }
        }
    }

    // MARK: each hop is its own request

    @Test("each hop is matched as its own request: the second origin's map_remote and header edit apply to that hop only")
    func eachHopMatchedAgain() async throws {
        try await withOrigin { second in
            try await with({ first in
                """
                rules:
                  - name: first-origin
                    match: { host: a.test }
                    map_remote: { to: "\(first.baseURL)" }
                    request: { set_headers: { X-First: "1" } }
                    on_redirect: { action: follow }
                  - name: second-origin
                    match: { host: b.test }
                    map_remote: { to: "\(second.baseURL)" }
                    request: { set_headers: { X-Second: "yes" } }

                """
            }) { first, proxy in
                let response = try await Hooks.curl(proxy, "http://a.test/redirect?to=http%3A%2F%2Fb.test%2Fheaders")
                #expect(response.status == 200)
                #expect(response.bodyText.hasPrefix("GET /headers HTTP/1.1\r\n"), "\(response.bodyText)")
                #expect(response.bodyText.contains("X-Second: yes\r\n"), "\(response.bodyText)")
                #expect(!response.bodyText.contains("X-First"), "the original's edits do not carry over")
                #expect(response.bodyText.contains("Host: 127.0.0.1:\(second.port)\r\n"), "\(response.bodyText)")
                #expect(first.requests.first?.header("X-First") == "1")
                #expect(first.requests.first?.header("X-Second") == nil)
                #expect(first.requests.count == 1)

                let records = await Hooks.records(proxy, count: 2)
                #expect(records.map(\.hop) == [0, 1])
                #expect(records.map(\.rules) == [["first-origin"], ["second-origin"]])
                #expect(records.map(\.url) == ["http://a.test/redirect?to=http%3A%2F%2Fb.test%2Fheaders",
                                               "http://b.test/headers"])
                #expect(records.map(\.upstreamURL) == ["\(first.baseURL)/redirect?to=http%3A%2F%2Fb.test%2Fheaders",
                                                       "\(second.baseURL)/headers"])
                // Order within the hops: hop 0 was mapped to the first origin; hop 1 mapped to the second, then
                // the chain's verdict.
                let texts = Hooks.eventTexts(records)
                #expect(Hooks.inOrder(texts, ["mapped → \(first.baseURL)", "mapped → \(second.baseURL)/headers",
                                              "redirect followed 1 hop"]), "\(texts)")
            }
        }
    }

    @Test("each hop gets its own trust: a hop to a pinned TLS origin is judged under its rule")
    func hopTrustJudged() async throws {
        let ca = TestCA.shared
        try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { tlsOrigin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([ca.root], to: "root.pem")
            for (pin, accepted) in [(ca.leaf.spkiPin, true), (ca.selfSigned.spkiPin, false)] {
                try await with({ origin in
                    """
                    rules:
                      - name: start
                        match: { host: "127.0.0.1" }
                        on_redirect: { action: follow }
                      - name: pinned-hop
                        match: { host: t.test }
                        map_remote: { to: "https://localhost:\(tlsOrigin.port)" }
                        trust: { pinning: public_key, pins: ["\(pin)"], ca_file: "\(root)" }

                    """
                }) { origin, proxy in
                    let before = tlsOrigin.requests.count
                    let response = try await Hooks.curl(
                        proxy, "\(origin.baseURL)/redirect?to=http%3A%2F%2Ft.test%2Fhead-test")
                    let records = await Hooks.records(proxy, count: 2)
                    let texts = Hooks.eventTexts(records)
                    #expect(records.map(\.hop) == [0, 1])
                    #expect(records.first?.events.contains { $0.hook == .trust } == false, "hop 0 has no trust rule")
                    if accepted {
                        #expect(response.status == 200)
                        #expect(response.bodyText == "head-test body\n")
                        #expect(tlsOrigin.requests.count == before + 1)
                        #expect(Hooks.inOrder(texts, ["mapped → https://localhost", "trust accepted"]), "\(texts)")
                        #expect(records.last?.events.map(\.action).contains("redirect followed 1 hop") == true)
                    } else {
                        #expect(response.status == 502)
                        #expect(response.bodyText.hasPrefix("hookproxy: trust rejected localhost"), "\(response.bodyText)")
                        #expect(tlsOrigin.requests.count == before)
                        #expect(Hooks.inOrder(texts, ["mapped → https://localhost", "trust rejected"]), "\(texts)")
                    }
                }
            }
        }
    }
}
