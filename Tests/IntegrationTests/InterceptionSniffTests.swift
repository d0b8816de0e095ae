import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// What a client sends first into an intercepted tunnel: TLS gets hookproxy's certificate; plain HTTP (Chromium
/// tunnels `ws://` through CONNECT) is served as `http://host:port`; nothing at all is no refusal of the certificate.
/// A plain TestOrigin on 127.0.0.1:0, hookproxy in-process intercepting 127.0.0.1, raw sockets as clients.
@Suite("Interception: the client's first bytes", .timeLimit(.minutes(2)))
struct InterceptionSniffTests {
    @Test("plain HTTP inside an intercepted tunnel is served as http://host:port, logged, never a certificate refusal")
    func plainHTTPInTunnel() async throws {
        try await withPlainIntercepting { origin, proxy in
            let client = try await RawClient.connect(port: proxy.port)
            defer { client.close() }
            try await client.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            let connect = try await client.readResponse(method: "CONNECT")
            #expect(connect.status == 200)
            try await client.send("GET /head-test HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "head-test body\n")
            // keep-alive: a second request on the same tunnel
            try await client.send("GET /head-test HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try await client.readResponse().status == 200)
            #expect(origin.requests.map(\.target) == ["/head-test", "/head-test"])
            let records = await Hooks.records(proxy, count: 2)
            #expect(records.first?.url == "http://127.0.0.1:\(origin.port)/head-test", "\(records.map(\.url))")
            #expect(Hooks.eventTexts(records).contains("intercepted"), "\(Hooks.eventTexts(records))")
            #expect(proxy.server.interceptionRefusals.isEmpty, "\(proxy.server.interceptionRefusals)")
        }
    }

    @Test("a client that closes its intercepted tunnel before any byte has refused no certificate")
    func closeBeforeHandshake() async throws {
        try await withPlainIntercepting { origin, proxy in
            for _ in 0..<3 {
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
                #expect(try await client.readResponse(method: "CONNECT").status == 200)
                client.close()
            }
            #expect(await eventually(timeout: .seconds(10)) { proxy.server.openConnections == 0 },
                    "the proxy closed its side of every tunnel")
            #expect(proxy.server.interceptionRefusals.isEmpty, "\(proxy.server.interceptionRefusals)")
        }
    }

    @Test("a client that sends nothing into its intercepted tunnel is closed at --header-timeout")
    func silentClientClosed() async throws {
        try await withPlainIntercepting({ $0.limits.headerTimeoutMs = 300 }) { origin, proxy in
            let client = try await RawClient.connect(port: proxy.port)
            defer { client.close() }
            try await client.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try await client.readResponse(method: "CONNECT").status == 200)
            #expect(await client.waitForClose(), "the silent tunnel is closed, its slot freed")
            #expect(await eventually(timeout: .seconds(10)) { proxy.server.openConnections == 0 })
        }
    }

    private func withPlainIntercepting(_ configure: (inout ProxyConfiguration) -> Void = { _ in },
                                       _ body: (TestOrigin, ProxyHarness) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            try await withHookProxy(rules: nil, { configuration in
                configuration.interceptHosts = ["127.0.0.1"].compactMap(HostGlob.init)
                configuration.caDirectory = directory.path + "/ca"
                configure(&configuration)
            }) { proxy in
                try await body(origin, proxy)
            }
        }
    }
}
