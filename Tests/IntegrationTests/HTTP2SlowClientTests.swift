import Foundation
import NIOCore
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// An HTTP/2 upstream transfer is never paused (libcurl 7.88 pauses one coarsely), so its response queues for a
/// client that reads slowly, up to 16 MiB a stream. A hostile tester opened 30 streams that read nothing and the proxy
/// grew by 480 MB; 100 streams on one connection could have held 1.6 GiB. All such queues together now stay under
/// `ProxyLimits.multiplexedBacklogLimit` (256 MiB by default; 6 MiB here): a stream that is behind and would pass it
/// is refused, its queue freed at once, and its client stream reset; a stream whose client reads is not refused.
@Suite("HTTP/2 upstreams and clients that do not read", .timeLimit(.minutes(2)))
struct HTTP2SlowClientTests {
    static let ca = TestCA.shared
    static let size = 4 << 20
    static let limit = 6 << 20

    @Test("streams that read nothing are refused once their queues together pass the limit; the budget comes back")
    func unreadStreamsShareOneBudget() async throws {
        try await TestH2Origin.with(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy({ $0.limits.multiplexedBacklogLimit = Self.limit }) { proxy, _ in
                let roots = [try proxy.server.certificateAuthority().certificate]
                let client = try await H2TunnelClient.connect(proxyPort: proxy.port, port: origin.port, trustRoots: roots)
                // Three 4 MiB answers nobody reads: 12 MiB would wait for them without the shared bound.
                var unread: [StreamCollector] = []
                for index in 0..<3 { unread.append(try await client.open("GET", "/bytes/\(Self.size)?n=\(index)", autoRead: false)) }
                let refused = { proxy.recorder.records.filter { $0.error?.contains("already hold 6 MiB") == true }.count }
                #expect(await eventually(timeout: .seconds(30)) { refused() >= 1 },
                        "nothing refused: \(proxy.recorder.records.compactMap(\.error))")
                try await Task.sleep(for: .milliseconds(300))  // whatever can still come has come
                #expect(proxy.server.multiplexedBacklogBytes <= Self.limit, "held: \(proxy.server.multiplexedBacklogBytes)")

                // The client leaves: everything its streams held is given back.
                await client.close()
                _ = unread
                #expect(await eventually(timeout: .seconds(10)) { proxy.server.multiplexedBacklogBytes == 0 },
                        "held after the client left: \(proxy.server.multiplexedBacklogBytes)")

                // A client that reads gets its whole answer.
                let reader = try await H2TunnelClient.connect(proxyPort: proxy.port, port: origin.port, trustRoots: roots)
                defer { Task { await reader.close() } }
                let reading = try await reader.open("GET", "/bytes/\(Self.size)?n=reader").response(timeout: .seconds(60))
                #expect(reading.status == 200, "\(reading.failure ?? "")")
                #expect(reading.body.count == Self.size, "\(reading.failure ?? "")")
            }
        }
    }
}
