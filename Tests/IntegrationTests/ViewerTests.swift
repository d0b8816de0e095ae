import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import ProxyUI
import Testing

/// Issue 17: the traffic viewer on the proxy's own address — its API through real sockets, and each security rule.
@Suite("viewer: API and security (issue 17)", .timeLimit(.minutes(3)))
struct ViewerTests {
    static func withViewer<T>(_ configure: @escaping (inout ProxyConfiguration) -> Void = { _ in },
                              _ body: (ProxyHarness, TestOrigin) async throws -> T) async throws -> T {
        try await withProxyAndOrigin({ configuration in
            configuration.viewer = ViewerSettings()
            configure(&configuration)
        }, body)
    }

    /// An origin-form request straight to the proxy (a browser on the viewer).
    static func get(_ proxy: ProxyHarness, _ path: String, method: String = "GET", headers: [String] = [],
                    host: String? = nil) async throws -> RawClient.Response {
        try await withRawClient(proxy) { client in
            try await client.send(rawRequest("\(method) \(path) HTTP/1.1", ["Host: \(host ?? "127.0.0.1:\(proxy.port)")"] + headers))
            return try await client.readResponse(method: method)
        }
    }

    static func json(_ response: RawClient.Response) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(response.body))
    }

    @Test("an exchange through the proxy is a flow: listed, fetched with its body, in the HAR; the viewer's own requests are not flows")
    func api() async throws {
        try await Self.withViewer { proxy, origin in
            let through = try await curlThrough(proxy, ["\(origin.baseURL)/status/404"])
            #expect(through.exitCode == 0, "\(through.stderr)")
            let viewer = try #require(proxy.server.viewer)
            #expect(await eventually { viewer.store.flows().first?.done == true })
            for _ in 0..<3 { _ = try await Self.get(proxy, "/api/flows") }
            _ = try await Self.get(proxy, "/")
            let list = try await Self.get(proxy, "/api/flows")
            #expect(list.status == 200)
            #expect(list.header("content-type") == "application/json")
            let flows = try #require(try Self.json(list) as? [[String: Any]])
            #expect(flows.count == 1, "only the proxied exchange: \(flows.map { $0["url"] ?? "" })")
            let flow = try #require(flows.first)
            #expect(flow["state"] as? String == "done")
            #expect(flow["status"] as? Int == 404)
            #expect(flow["url"] as? String == "\(origin.baseURL)/status/404")
            let id = try #require(flow["id"] as? Int)
            #expect(proxy.recorder.records.map(\.id) == [id], "the record the log writers got has the flow's id")

            let one = try await Self.get(proxy, "/api/flows/\(id)")
            #expect((try Self.json(one) as? [String: Any])?["response_body"] as? String == "status 404\n")
            let body = try await Self.get(proxy, "/api/flows/\(id)/response/body")
            #expect(body.bodyText == "status 404\n")
            let har = try await Self.get(proxy, "/api/har?filter=4xx")
            let entries = ((try Self.json(har) as? [String: Any])?["log"] as? [String: Any])?["entries"] as? [Any]
            #expect(entries?.count == 1)
            #expect(try await Self.get(proxy, "/api/flows/999999").status == 404)
            #expect(try await Self.get(proxy, "/api/openapi.json").status == 200)
        }
    }

    @Test("an exchange in flight is a pending flow, then done under the same id")
    func pending() async throws {
        try await Self.withViewer { proxy, origin in
            // the origin answers /held only when the test releases it: the exchange is in flight until then
            let store = try #require(proxy.server.viewer).store
            // pending flows are announced while a page watches (an /api/events stream is open)
            let watch = try #require(store.watch(FlowStore.Watcher(changed: {}, closed: {})))
            defer { store.unwatch(watch.token) }
            async let held = curlThrough(proxy, ["\(origin.baseURL)/held?key=viewer-pending"])
            #expect(await eventually(timeout: .seconds(10)) { !store.flows().isEmpty })
            let listed = try #require(try Self.json(try await Self.get(proxy, "/api/flows")) as? [[String: Any]])
            #expect(listed.count == 1)
            #expect(listed.first?["state"] as? String == "pending")
            #expect(listed.first?["status"] is NSNull)
            let id = try #require(listed.first?["id"] as? Int)
            origin.release("viewer-pending")
            #expect(try await held.exitCode == 0)
            #expect(await eventually(timeout: .seconds(10)) { store.flow(id: id)?.done == true })
            let done = try #require(try Self.json(try await Self.get(proxy, "/api/flows/\(id)")) as? [String: Any])
            #expect(done["state"] as? String == "done")
            #expect(done["status"] as? Int == 200)
            #expect(store.count == 1, "the same flow, updated")
        }
    }

    @Test("a followed redirect: each hop a flow, the next hop pending while it is in flight, hop 0's record keeping its id")
    func redirectHops() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let rules = try Hooks.store(directory, """
                rules:
                  - name: follow
                    match: { host: 127.0.0.1 }
                    on_redirect: { action: follow }
                """)
            try await withHookProxy(rules: rules, { $0.viewer = ViewerSettings() }) { proxy in
                let store = try #require(proxy.server.viewer).store
                let watch = try #require(store.watch(FlowStore.Watcher(changed: {}, closed: {})))
                defer { store.unwatch(watch.token) }
                async let followed = curlThrough(proxy, ["\(origin.baseURL)/redirect?to=%2Fheld%3Fkey%3Dviewer-hop"])
                #expect(await eventually(timeout: .seconds(10)) { store.flows().count == 2 })
                let flows = store.flows()
                #expect(flows.map(\.record.hop) == [0, 1])
                #expect(flows.map(\.done) == [true, false], "hop 0 recorded, hop 1 in flight")
                #expect(flows.last?.record.url == "\(origin.baseURL)/held?key=viewer-hop")
                origin.release("viewer-hop")
                #expect(try await followed.exitCode == 0)
                #expect(await eventually(timeout: .seconds(10)) { store.flows().allSatisfy(\.done) })
                #expect(store.flows().map(\.id) == flows.map(\.id), "the same two flows, updated")
                let records = await Hooks.records(proxy, count: 2)
                #expect(records.map(\.id) == flows.map(\.id), "the log records carry the flows' ids")
            }
        }
    }

    @Test("the store keeps only the last --ui-flows exchanges")
    func flowBound() async throws {
        try await Self.withViewer({ $0.viewer = ViewerSettings(limits: .init(maxFlows: 3)) }) { proxy, origin in
            for index in 0..<6 {
                let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/\(index)"])
                #expect(result.exitCode == 0)
            }
            #expect(await eventually { proxy.recorder.records.count == 6 })
            let flows = try #require(try Self.json(try await Self.get(proxy, "/api/flows")) as? [[String: Any]])
            #expect(flows.count == 3)
            #expect(flows.compactMap { $0["url"] as? String } == (3..<6).map { "\(origin.baseURL)/bytes/\($0)" })
        }
    }

    // MARK: security, one rule each

    @Test("only the listener's own Host: another host name on its port gets 403 (DNS rebinding)")
    func otherHostIsRefused() async throws {
        try await Self.withViewer { proxy, _ in
            let refused = try await Self.get(proxy, "/api/flows", host: "rebind.example:\(proxy.port)")
            #expect(refused.status == 403)
            for host in ["localhost:\(proxy.port)", "127.0.0.1:\(proxy.port)"] {
                #expect(try await Self.get(proxy, "/api/flows", host: host).status == 200, "\(host)")
            }
        }
    }

    @Test("a listener on every address also answers an IP literal Host (a browser on the LAN), never another name")
    func anyAddressListener() async throws {
        try await Self.withViewer({ $0.host = "0.0.0.0" }) { (proxy: ProxyHarness, _: TestOrigin) async throws in
            #expect(try await Self.get(proxy, "/api/flows", host: "192.0.2.7:\(proxy.port)").status == 200)
            #expect(try await Self.get(proxy, "/api/flows", host: "[2001:db8::7]:\(proxy.port)").status == 200)
            #expect(try await Self.get(proxy, "/api/flows", host: "rebind.example:\(proxy.port)").status == 403)
        }
    }

    @Test("a proxied (absolute-form) request for the viewer never reaches the API")
    func absoluteFormNeverReachesTheAPI() async throws {
        try await Self.withViewer { proxy, _ in
            let response = try await Self.get(proxy, "http://127.0.0.1:\(proxy.port)/api/flows")
            #expect(response.status == 404)
        }
    }

    @Test("a CONNECT to the listener's own address is refused, never a tunnel to itself")
    func connectToItselfIsRefused() async throws {
        try await Self.withViewer { proxy, _ in
            let response = try await withRawClient(proxy) { client in
                try await client.send(rawRequest("CONNECT 127.0.0.1:\(proxy.port) HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
                return try await client.readResponse(method: "CONNECT")
            }
            #expect(response.status == 508)
        }
    }

    @Test("no CORS headers, whatever the Origin or method")
    func noCORS() async throws {
        try await Self.withViewer { proxy, _ in
            let origin = ["Origin: http://evil.example"]
            for response in [try await Self.get(proxy, "/api/flows", headers: origin),
                             try await Self.get(proxy, "/api/flows", method: "OPTIONS",
                                                headers: origin + ["Access-Control-Request-Method: POST"]),
                             try await Self.get(proxy, "/", headers: origin)] {
                #expect(!response.headers.contains { $0.name.lowercased().hasPrefix("access-control-") }, "\(response.rawHead)")
            }
        }
    }

    @Test("POST needs a same-origin Origin: none or another gets 403, the viewer's own clears")
    func postNeedsSameOrigin() async throws {
        try await Self.withViewer { proxy, origin in
            _ = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/3"])
            let store = try #require(proxy.server.viewer).store
            #expect(await eventually { store.count == 1 })
            let length = ["Content-Length: 0"]
            #expect(try await Self.get(proxy, "/api/clear", method: "POST", headers: length).status == 403)
            #expect(try await Self.get(proxy, "/api/clear", method: "POST", headers: length + ["Origin: http://evil.example"]).status == 403)
            #expect(try await Self.get(proxy, "/api/clear", method: "POST", headers: length + ["Origin: null"]).status == 403)
            #expect(store.count == 1)
            let cleared = try await Self.get(proxy, "/api/clear", method: "POST", headers: length + ["Origin: http://127.0.0.1:\(proxy.port)"])
            #expect(cleared.status == 200)
            #expect(store.count == 0)
        }
    }

    @Test("--proxy-auth protects the viewer and API with Basic (401), while the small page's facts and /ca.pem stay open")
    func proxyAuthProtectsTheViewer() async throws {
        let ca = try TemporaryDirectory()
        try await Self.withViewer({
            $0.proxyAuth = ProxyCredentials(user: "u", password: "p")
            $0.caDirectory = ca.path
        }) { proxy, origin in
            for path in ["/", "/api/flows"] {
                let refused = try await Self.get(proxy, path)
                #expect(refused.status == 401, "\(path)")
                #expect(refused.header("www-authenticate")?.hasPrefix("Basic ") == true)
                #expect(refused.bodyText.contains("/ca.pem"), "the small page stays readable")
                let wrong = "Authorization: Basic " + Data("u:x".utf8).base64EncodedString()
                #expect(try await Self.get(proxy, path, headers: [wrong]).status == 401)
            }
            let good = "Authorization: Basic " + Data("u:p".utf8).base64EncodedString()
            #expect(try await Self.get(proxy, "/api/flows", headers: [good]).status == 200)
            let pem = try await Self.get(proxy, "/ca.pem")
            #expect(pem.status == 200)
            #expect(pem.bodyText.hasPrefix("-----BEGIN CERTIFICATE-----"))
            // proxying still asks for Proxy-Authorization
            let proxied = try await curlThrough(proxy, ["-o", "/dev/null", "-w", "%{http_code}", "\(origin.baseURL)/bytes/1"])
            #expect(proxied.stdoutText == "407")
        }
    }

    @Test("--no-ui: /api/* answers 404, the small page and /ca.pem stay")
    func noUI() async throws {
        let ca = try TemporaryDirectory()
        try await withProxy({ $0.caDirectory = ca.path }) { proxy in
            #expect(proxy.server.viewer == nil)
            #expect(try await Self.get(proxy, "/api/flows").status == 404)
            #expect(try await Self.get(proxy, "/api/events").status == 404)
            let page = try await Self.get(proxy, "/")
            #expect(page.status == 200)
            #expect(page.bodyText.contains("/ca.pem"))
            #expect(try await Self.get(proxy, "/ca.pem").status == 200)
        }
    }
}
