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
}
