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

    @Test("a followed 3xx whose body never ends: the next hop starts anyway, and the client gets its answer")
    func endlessRedirectBody() async throws {
        try await withOrigin { origin in
            let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 0x10000) + Array("\r\n".utf8)
            let script: [MisbehavingOrigin.Step] = [
                .text("HTTP/1.1 302 Found\r\nLocation: \(origin.baseURL)/echo\r\nTransfer-Encoding: chunked\r\n\r\n"),
                .send(Array([[UInt8]](repeating: chunk, count: 8).joined())),
                .hang,
            ]
            try await MisbehavingOrigin.with(script) { redirector in
                let directory = try TemporaryDirectory()
                let rules = try Hooks.store(directory, Self.follow)
                try await withHookProxy(rules: rules) { proxy in
                    let started = ContinuousClock.now
                    let response = try await Hooks.curl(proxy, "\(redirector.baseURL)/start", ["--max-time", "10"])
                    #expect(response.status == 200, "\(response.stderr)")
                    #expect(ContinuousClock.now - started < .seconds(8))
                    #expect(origin.requests.map(\.target) == ["/echo"])
                    let records = await Hooks.records(proxy, count: 2)
                    #expect(records.map(\.hop) == [0, 1])
                    #expect(records.map { $0.response?.status } == [302, 200])
                }
            }
        }
    }

    @Test("a Location with a scheme hookproxy cannot fetch goes to the client as the 3xx, never as a path",
          arguments: ["file:///etc/passwd", "data:text/plain,hi", "mailto:a@b.test", "gopher://127.0.0.1:70/_x",
                      "http://127.0.0.1:99999/x"])
    func unfollowableLocation(location: String) async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let rules = try Hooks.store(directory, Self.follow)
            try await withHookProxy(rules: rules) { proxy in
                let escaped = location.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? location
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/redirect?to=\(escaped)")
                #expect(response.status == 302)
                #expect(response.header("Location") == location)
                #expect(origin.requests.count == 1, "followed to \(origin.requests.map(\.target))")
            }
        }
    }

    @Test("a followed 303/307/308 whose upload and own body are both over --body-limit: 303 goes on as a GET, 307/308 get a 502 saying the body cannot be replayed",
          arguments: [303, 307, 308])
    func bodiesOverLimit(status: Int) async throws {
        try await withOrigin { target in
            let filler = String(repeating: "r", count: 8192)
            let script: [MisbehavingOrigin.Step] = [
                .text("HTTP/1.1 \(status) Moved\r\nLocation: \(target.baseURL)/echo\r\nContent-Length: \(filler.utf8.count)\r\n\r\n\(filler)"),
            ]
            try await MisbehavingOrigin.with(script) { redirector in
                let directory = try TemporaryDirectory()
                let rules = try Hooks.store(directory, Self.follow)
                try await withHookProxy(rules: rules, { $0.limits.bodyLimit = 1024 }) { proxy in
                    let upload = String(repeating: "u", count: 8192)
                    let response = try await Hooks.curl(proxy, "\(redirector.baseURL)/start", ["--data-binary", upload])
                    // The first hop carried the whole upload, unchanged.
                    #expect(String(decoding: redirector.received, as: UTF8.self).hasSuffix("\r\n\r\n" + upload))
                    let records = await Hooks.records(proxy, count: status == 303 ? 2 : 1)
                    if status == 303 {
                        #expect(response.status == 200, "\(response.bodyText.prefix(300))")
                        #expect(response.header("X-Method") == "GET")
                        #expect(response.bodyText.isEmpty, "the 303's own body never reaches the client")
                        #expect(target.requests.map(\.method) == ["GET"])
                        #expect(target.requests.first?.body.isEmpty == true)
                        #expect(records.map { $0.response?.status } == [303, 200])
                    } else {
                        #expect(response.status == 502, "\(response.bodyText.prefix(300))")
                        #expect(response.bodyText.contains("larger than --body-limit"), "\(response.bodyText)")
                        #expect(response.bodyText.contains("replay"), "\(response.bodyText)")
                        #expect(!response.bodyText.contains(filler.prefix(64)), "the \(status)'s own body leaked")
                        #expect(target.requests.isEmpty, "the \(status) was followed without its body")
                        #expect(records.last?.error?.contains("larger than --body-limit") == true, "\(records.map(\.error))")
                    }
                }
            }
        }
    }
}
