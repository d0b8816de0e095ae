import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// `OPTIONS *` through hookproxy (RFC 9112 §3.2.4), with the real curl binary and an origin that records the bytes
/// it gets. Before, `OPTIONS *` got 400, and `OPTIONS http://host:port` reached the origin as `OPTIONS /`.
@Suite("OPTIONS * (RFC 9112 §3.2.4)", .timeLimit(.minutes(2)))
struct AsteriskFormProxyTests {
    static let answer: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\nAllow: GET, OPTIONS\r\nContent-Length: 0\r\n\r\n")]

    /// The request lines the origin got, in order.
    static func requestLines(_ origin: MisbehavingOrigin) -> [String] {
        String(decoding: origin.received, as: UTF8.self).components(separatedBy: "\r\n").filter { $0.hasSuffix(" HTTP/1.1") }
    }

    @Test("curl's --request-target '*' and an absolute-form OPTIONS with an empty path both reach the origin as OPTIONS *")
    func forwardedAsAnAsterisk() async throws {
        try await MisbehavingOrigin.with(Self.answer) { origin in
            try await withProxy { proxy in
                let curl = try await curlThrough(proxy, ["-X", "OPTIONS", "--request-target", "*", "-D", "-", "-o", "/dev/null",
                                                         "\(origin.baseURL)/"])
                #expect(curl.exitCode == 0 && curl.stdoutText.contains("Allow: GET, OPTIONS"), "\(curl.stderr) \(curl.stdoutText)")
                let raw = try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("OPTIONS \(origin.baseURL) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                    return try await client.readResponse()
                }
                #expect(raw.status == 200)
                #expect(await eventually(timeout: .seconds(10)) { Self.requestLines(origin).count == 2 })
                #expect(Self.requestLines(origin) == ["OPTIONS * HTTP/1.1", "OPTIONS * HTTP/1.1"], "\(Self.requestLines(origin))")
                let records = await proxy.recorder.waitFor(count: 2)
                #expect(records.allSatisfy { $0.url == origin.baseURL && $0.request.method == "OPTIONS" }, "\(records.map(\.url))")
            }
        }
    }

    @Test("OPTIONS * to hookproxy itself is answered there; GET * is refused with 400; neither goes anywhere")
    func ownAsteriskAndOtherMethods() async throws {
        try await withProxy { proxy in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("OPTIONS * HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
                let own = try await client.readResponse()
                #expect(own.status == 200 && own.header("Allow")?.contains("CONNECT") == true, "\(own.rawHead)")
                try await client.send(rawRequest("GET * HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
                let refused = try await client.readResponse()
                #expect(refused.status == 400 && refused.bodyText.contains("for OPTIONS only"), "\(refused.bodyText)")
            }
        }
    }

    @Test("inside an intercepted tunnel, OPTIONS * from an HTTP/2 client (:path *) and from curl over HTTP/1.1 reaches the origin as OPTIONS *")
    func interceptedTunnel() async throws {
        let ca = TestCA.shared
        try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                let h2 = try await client.send("OPTIONS", "*")
                #expect(h2.status == 404, "the origin's own answer to '*': \(h2)")
                let curl = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/",
                                                ["--http1.1", "--cacert", caPath, "-X", "OPTIONS", "--request-target", "*"])
                #expect(curl.exitCode == 0 && curl.status == 404, "\(curl.stderr)")
                #expect(origin.requests.map(\.target) == ["*", "*"], "\(origin.requests.map(\.target))")
                let records = await Hooks.records(proxy, count: 2)
                #expect(records.allSatisfy { $0.url == "https://localhost:\(origin.port)" }, "\(records.map(\.url))")
            }
        }
    }

    @Test("a --reverse listener forwards OPTIONS * as OPTIONS *, whatever the route's path")
    func reverseListener() async throws {
        try await MisbehavingOrigin.with(Self.answer) { origin in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try await withReverseProxy(["127.0.0.1:0=\(origin.baseURL)/v2"], in: directory) { _, listeners in
                let listener = try #require(listeners.first)
                let client = try await RawClient.connect(port: listener.port)
                defer { client.close() }
                try await client.send(rawRequest("OPTIONS * HTTP/1.1", ["Host: 127.0.0.1:\(listener.port)"]))
                #expect(try await client.readResponse().status == 200)
                #expect(Self.requestLines(origin) == ["OPTIONS * HTTP/1.1"], "\(Self.requestLines(origin))")
            }
        }
    }
}
