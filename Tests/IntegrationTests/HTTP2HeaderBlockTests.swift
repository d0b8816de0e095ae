import Foundation
import ProxyModel
import ProxyTestSupport
import Testing

/// NIO's HTTP/2 encoder sends a header block as one HEADERS frame (no CONTINUATION), and failing to encode one is a
/// connection error: a response head over 16 KiB on one stream used to take down the client's whole connection,
/// every other stream with it. The exchange now refuses that head on its own stream (502) and the others go on.
@Suite("HTTP/2 header blocks larger than a frame", .timeLimit(.minutes(2)))
struct HTTP2HeaderBlockTests {
    static let ca = TestCA.shared
    static let slowSize = 2_000_000

    /// NIO's HPACK decoder takes hookproxy's own SETTINGS_MAX_HEADER_LIST_SIZE only once the client acknowledges
    /// it; before that it takes 16 KiB. curl (like browsers) sends its first request before its acknowledgement, so
    /// a request head over 16 KiB failed the whole connection with GOAWAY COMPRESSION_ERROR, where HTTP/1.1 took it
    /// (a review's find: `-H "x-big: <20000 bytes>"`).
    @Test("curl --http2's first request with a 40 KB head gets through, as over HTTP/1.1")
    func largeHeadInTheFirstFlight() async throws {
        let big = String(repeating: "a", count: 20_000)
        try await withOrigin(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test",
                                                    ["--http2", "--cacert", caPath, "-H", "x-big: \(big)", "-H", "x-big2: \(big)"])
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.status == 200, "\(response.stderr)")
                #expect(origin.requests.first?.header("x-big") == big)
                #expect(origin.requests.first?.header("x-big2") == big)
                // Many streams at once on one connection, each with a big head: the settings hold for all of them.
                let many = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test?[1-6]",
                                                ["--http2", "--parallel", "--cacert", caPath, "-H", "x-big: \(big)"])
                #expect(many.exitCode == 0, "\(many.stderr)")
                #expect(origin.requests.count == 7)
                let records = await Hooks.records(proxy, count: 7)
                #expect(records.allSatisfy { $0.request.version == .http2 && $0.response?.status == 200 })
            }
        }
    }

    @Test("a response head too large for one HEADERS frame fails its stream with a 502, not the connection")
    func oversizedHeadFailsOnlyItsStream() async throws {
        // A header value of 24000 mixed characters: over 16 KiB even Huffman-coded.
        let big = (0..<24000).map { i in String("aZ0-x9Qk".randomElement()!) + (i % 97 == 0 ? "/" : "") }.joined()
        let rules = """
              - name: huge-head
                match: { host: localhost, path: "/head-test" }
                response: { set_headers: { X-Huge: "\(big)" } }

            """
        try await withOrigin(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy(extraRules: rules) { proxy, _ in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                // A long download on the same connection, not read yet: it must survive the other stream's failure.
                let slow = try await client.open("GET", "/bytes/\(Self.slowSize)", autoRead: false)
                #expect(await eventually(timeout: .seconds(10)) { origin.requests.contains { $0.target.hasPrefix("/bytes/") } })
                let huge = try await client.open("GET", "/head-test").response()
                #expect(huge.status == 502)
                #expect(huge.text.contains("CONTINUATION"), "\(huge.text)")
                slow.startReading()
                let slowResponse = try await slow.response(timeout: .seconds(60))
                #expect(slowResponse.status == 200)
                #expect(slowResponse.body.count == Self.slowSize, "\(slowResponse.failure ?? "")")
                // The connection is still usable for new streams.
                let after = try await client.open("GET", "/head-test?again=no").response()
                #expect(after.status == 502)
                let records = await Hooks.records(proxy, count: 3)
                #expect(records.contains { $0.error?.contains("HTTP/2 client") == true }, "\(records.compactMap(\.error))")
            }
        }
    }

    @Test("trailers too large for one HEADERS frame reset their stream; the connection's other streams go on")
    func oversizedTrailersResetOnlyTheirStream() async throws {
        // Eight trailer lines of 4000 mixed characters: each under curl 7.88's limit for a trailer line (about 8000
        // fails with "Out of memory in chunked-encoding"), together well over a frame even Huffman-coded.
        let lines = (1...8).map { n in
            "X-Big-\(n): " + (0..<4000).map { i in String("aZ0-x9Qk".randomElement()!) + (i % 97 == 0 ? "/" : "") }.joined() + "\r\n"
        }.joined()
        // An HTTP/1.1 origin whose chunked answer ends in a large trailer block.
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Big-1\r\n\r\n"),
            .text("5\r\nhello\r\n0\r\n\(lines)\r\n"),
        ]
        try await MisbehavingOrigin.with(script, tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, _ in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                let first = try await client.open("GET", "/big-trailers", headers: [("te", "trailers")]).response()
                #expect(first.status == 200)
                #expect(first.reset != nil || first.failure != nil, "the stream must not end cleanly without its trailers")
                #expect(first.trailers == nil)
                // The connection carries on: a second stream gets its own (equally refused) answer, not a GOAWAY.
                let second = try await client.open("GET", "/again", headers: [("te", "trailers")]).response()
                #expect(second.status == 200, "\(second.failure ?? "")")
                let records = await Hooks.records(proxy, count: 2)
                #expect(records.allSatisfy { $0.error?.contains("trailer block") == true }, "\(records.compactMap(\.error))")
            }
        }
    }
}
