import Foundation
import NIOCore
import ProxyModel
import ProxyTestSupport
import Testing

/// Issue 16, "streams are independent": 50 concurrent streams on one client connection with one slow reader, over a
/// multiplexed HTTP/2 upstream (where libcurl 7.88 would pause coarsely, so hookproxy buffers the slow stream's
/// response instead of pausing its transfer) and over HTTP/1.1 upstreams (where each transfer pauses alone).
@Suite("HTTP/2 stream independence (issue 16)", .timeLimit(.minutes(3)))
struct HTTP2StreamTests {
    static let ca = TestCA.shared
    static var identity: TestTLSIdentity { ca.identity([ca.leaf, ca.intermediate]) }
    static let slowSize = 3_000_000

    @Test("50 streams over a multiplexed h2 upstream: a stream that is not read does not stall the other 49")
    func fiftyStreamsH2Upstream() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy { proxy, _ in
                try await fiftyStreams(proxy: proxy, port: origin.port, slowPath: "/bytes/\(Self.slowSize)", path: "/hello",
                                       body: "hello over h2\n") { origin.requests.contains { $0.path.hasPrefix("/bytes/") } }
                #expect(origin.acceptedConnections == 1, "the slow stream shared the upstream connection")
            }
        }
    }

    @Test("50 streams over HTTP/1.1 upstreams: a stream that is not read does not stall the other 49")
    func fiftyStreamsH1Upstream() async throws {
        try await withOrigin(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, _ in
                try await fiftyStreams(proxy: proxy, port: origin.port, slowPath: "/bytes/\(Self.slowSize)",
                                       path: "/head-test", body: "head-test body\n") {
                    origin.requests.contains { $0.target.hasPrefix("/bytes/") }
                }
            }
        }
    }

    /// Opens the slow stream (never read until the others are done), then 49 more, and checks they all complete
    /// while the slow one is still short of its body; then reads the slow one to its end.
    private func fiftyStreams(proxy: ProxyHarness, port: Int, slowPath: String, path: String, body: String,
                              slowStarted: () -> Bool) async throws {
        let client = try await H2TunnelClient.connect(
            proxyPort: proxy.port, port: port, trustRoots: [try proxy.server.certificateAuthority().certificate])
        defer { Task { await client.close() } }
        let slow = try await client.open("GET", slowPath, autoRead: false)
        #expect(await eventually(timeout: .seconds(10)) { slowStarted() }, "the slow request reached the origin")
        var others: [StreamCollector] = []
        for index in 0..<49 { others.append(try await client.open("GET", "\(path)?i=\(index)")) }
        for stream in others {
            let response = try await stream.response()
            #expect(response.status == 200)
            #expect(response.text == body)
        }
        #expect(try await slow.bodyCount() < Self.slowSize, "the slow stream is still unread")
        slow.startReading()
        let slowResponse = try await slow.response(timeout: .seconds(60))
        #expect(slowResponse.status == 200)
        #expect(slowResponse.body.count == Self.slowSize, "\(slowResponse.failure ?? "")")
        let records = await Hooks.records(proxy, count: 50)
        #expect(records.count == 50)
        #expect(records.allSatisfy { $0.error == nil }, "\(records.compactMap(\.error))")
    }
}
