import Foundation
import ProxyModel
import ProxyTestSupport
import Testing

/// Fields an upstream or an HTTP/2 client puts where they do not belong, found by a review playing a hostile
/// upstream and client: framing and hop-by-hop fields in response trailers, `TE` in a response, `Content-Length` on a
/// 204, and an HTTP/2 `host` that names another server than `:authority`. Each reaches HTTP/1.1 and HTTP/2 clients
/// the way the RFCs allow, or is refused with an answer the client can read.
@Suite("Upstream fields out of place", .timeLimit(.minutes(2)))
struct UpstreamFieldHygieneTests {
    static let ca = TestCA.shared

    /// A chunked answer whose trailers hold framing and routing fields beside a real one, and whose head says `TE`.
    static let trailersScript: [MisbehavingOrigin.Step] = [
        .text("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum, X-Hop-Only\r\nTE: trailers\r\nConnection: X-Hop-Only\r\n\r\n"),
        .text("5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Hop-Only: 1\r\nContent-Length: 99\r\nConnection: close\r\nX-Ctl: a\u{1B}b\r\nX-Del: \u{7F}\r\n\r\n"),
        .close,
    ]
    static let noContentScript: [MisbehavingOrigin.Step] = [
        .text("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Kept: yes\r\n\r\nhello"), .close,
    ]

    /// An HTTP/2 client through an intercepting proxy to a TLS origin playing `script`.
    private func withH2(_ script: [MisbehavingOrigin.Step],
                        _ body: (H2TunnelClient, MisbehavingOrigin, ProxyHarness) async throws -> Void) async throws {
        try await MisbehavingOrigin.with(script, tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, _ in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                try await body(client, origin, proxy)
            }
        }
    }

    /// The raw bytes an HTTP/1.1 client gets for one absolute-form GET (with `Connection: close`) through the proxy.
    private func rawAnswer(_ script: [MisbehavingOrigin.Step], headers: [String] = []) async throws -> String {
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                try await rawGET("\(origin.baseURL)/x", host: "127.0.0.1:\(origin.port)", through: proxy, headers: headers)
            }
        }
    }

    @Test("HTTP/2: response trailers reach the client without framing or hop-by-hop fields; the head without TE")
    func h2Trailers() async throws {
        try await withH2(Self.trailersScript) { client, _, _ in
            let response = try await client.send("GET", "/t", headers: [("te", "trailers")])
            #expect(response.status == 200 && response.text == "hello", "\(response)")
            #expect(response.reset == nil && response.failure == nil, "\(response)")
            #expect(response.trailer("x-checksum") == "abc", "\(String(describing: response.trailers))")
            #expect(response.trailer("content-length") == nil && response.trailer("connection") == nil
                        && response.trailer("x-hop-only") == nil,
                    "\(String(describing: response.trailers))")
            #expect(response.trailer("x-ctl") == nil && response.trailer("x-del") == nil, "control characters: \(String(describing: response.trailers))")
            #expect(response.header("te") == nil, "\(response.headers)")
            #expect(response.header("trailer") == "X-Checksum", "announces only what comes: \(response.headers)")
        }
    }

    @Test("HTTP/1.1 with TE: trailers: the chunked trailer holds the real field only, and the head has no TE")
    func http1Trailers() async throws {
        let answer = try await rawAnswer(Self.trailersScript, headers: ["TE: trailers"])
        let parts = answer.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        #expect(head.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(!head.lowercased().contains("\r\nte:"), "\(head)")
        #expect(head.contains("\r\nTrailer: X-Checksum\r\n"), "announces only what comes: \(head)")
        let tail = answer.dropFirst(head.count + 4)
        #expect(tail.contains("0\r\nX-Checksum: abc\r\n"), "\(tail)")
        #expect(!tail.lowercased().contains("content-length") && !tail.lowercased().contains("connection:"), "\(tail)")
        #expect(!tail.contains("X-Hop-Only"), "a trailer the head's Connection names: \(tail)")
        #expect(!tail.contains("X-Ctl") && !tail.contains("X-Del") && tail.hasSuffix("\r\n\r\n"), "a clean end: \(tail)")
    }

    @Test("HTTP/1.1: a Connection naming 16,000 fields before 7,800 response trailers is answered in time (the filter is linear)")
    func connectionNamingManyTrailers() async throws {
        let named = Array(repeating: "a", count: 16_000).joined(separator: ",")
        let trailers = String(repeating: "b: 1\r\n", count: 7_800) + "a: gone\r\n"
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: A,\(named)\r\n\r\n2\r\nhi\r\n0\r\n\(trailers)\r\n"),
            .close,
        ]
        // Each trailer against each name held the event loop for a minute (a review's find): the proxy's answer
        // would miss the raw client's read timeout (10 s).
        let answer = try await rawAnswer(script, headers: ["TE: trailers"])
        let tail = answer.components(separatedBy: "\r\n0\r\n").last ?? ""
        #expect(tail.contains("b: 1\r\n") && !tail.contains("a: gone"), "\(answer.prefix(200)) … \(tail.suffix(80))")
    }

    @Test("HTTP/2: a 204 with Content-Length and stray bytes ends cleanly, without Content-Length")
    func h2NoContent() async throws {
        try await withH2(Self.noContentScript) { client, _, _ in
            let response = try await client.send("GET", "/n")
            #expect(response.status == 204, "\(response)")
            #expect(response.reset == nil && response.failure == nil && response.body.isEmpty, "\(response)")
            #expect(response.header("content-length") == nil && response.header("x-kept") == "yes", "\(response.headers)")
            // The connection carries on.
            let again = try await client.send("GET", "/n")
            #expect(again.status == 204 && again.reset == nil, "\(again)")
        }
    }

    @Test("HTTP/1.1: a 204 goes on without its Content-Length")
    func http1NoContent() async throws {
        let answer = try await rawAnswer(Self.noContentScript)
        #expect(answer.hasPrefix("HTTP/1.1 204"), "\(answer)")
        #expect(!answer.lowercased().contains("content-length"), "\(answer)")
        #expect(answer.hasSuffix("\r\n\r\n"), "no body: \(answer)")
    }

    @Test("HTTP/2: a host field naming another server than :authority gets 400 and reaches no upstream; a matching one passes")
    func hostAgainstAuthority() async throws {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        try await withH2([.text(answer)]) { client, origin, proxy in
            let refused = try await client.send("GET", "/a", headers: [("host", "evil.example")])
            #expect(refused.status == 400, "\(refused)")
            #expect(refused.text.contains(":authority"), "\(refused.text)")
            // `:443` is the default port only as the whole port (a review's find: `h:1:443` passed as `h:1`).
            let doubled = try await client.send("GET", "/c", headers: [("host", "localhost:\(origin.port):443")])
            #expect(doubled.status == 400, "\(doubled)")
            let matching = try await client.send("GET", "/b", headers: [("host", "LOCALHOST:\(origin.port)")])
            #expect(matching.status == 200, "\(matching)")
            let received = String(decoding: origin.received, as: UTF8.self)
            #expect(!received.contains("evil.example") && !received.contains("GET /a") && !received.contains("GET /c"), "\(received)")
            let records = await Hooks.records(proxy, count: 3)
            #expect(records.map { $0.response?.status } == [400, 400, 200], "the refusals are logged")
        }
    }
}
