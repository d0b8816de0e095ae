import Foundation
import NIOCore
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// An HTTP/2 upstream transfer that may share its connection is not paused (libcurl 7.88 pauses one coarsely, with
/// its whole connection), so its response queues for a client that reads slowly, up to 16 MiB a stream. One alone on
/// its connection is paused like an HTTP/1 one (a hostile tester's 64 MB download at full speed and a 30 MB one at
/// 2 MB/s, each alone, were cut at 16 MiB). A hostile tester opened 30 streams that read nothing and the proxy
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

    @Test("a transfer alone on its HTTP/2 connection is paused for a slow client, not refused: the whole body arrives")
    func loneTransferPauses() async throws {
        try await TestH2Origin.with(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy({ $0.limits.multiplexedStreamLimit = 1 << 20 }) { proxy, caPath in
                // 4 MiB at 1 MiB/s: the origin is far ahead of this client at once (curl's HTTP/2 window is 32 MiB).
                let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/bytes/\(Self.size)",
                                                    ["--http1.1", "--cacert", caPath, "--limit-rate", "1M"])
                #expect(response.exitCode == 0, "\(response.stderr) \(proxy.recorder.records.compactMap(\.error))")
                #expect(response.body.count == Self.size)
                #expect(origin.requests.map(\.version) == ["HTTP/2"])
                #expect(proxy.server.multiplexedBacklogBytes == 0, "a paused transfer's queue is not the shared bound's")
            }
        }
    }

    @Test("a stream that takes the connection of a transfer paused alone shares it; that transfer buffers again")
    func besideAPausedTransfer() async throws {
        try await TestH2Origin.with(tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, _ in
                let roots = [try proxy.server.certificateAuthority().certificate]
                let client = try await H2TunnelClient.connect(proxyPort: proxy.port, port: origin.port, trustRoots: roots)
                defer { Task { await client.close() } }
                let unread = try await client.open("GET", "/bytes/\(Self.size)", autoRead: false)
                // Its client reads nothing: the transfer goes past the high-water mark alone, and is paused.
                #expect(await eventually(timeout: .seconds(15)) { origin.requests.count == 1 })
                try await Task.sleep(for: .seconds(1))
                #expect(proxy.server.multiplexedBacklogBytes == 0, "paused, not buffered")
                let beside = try await client.open("GET", "/hello").response(timeout: .seconds(10))
                #expect(beside.status == 200, "\(beside.failure ?? "")")
                #expect(beside.text == "hello over h2\n")
                #expect(origin.acceptedConnections == 1, "multiplexed: \(origin.acceptedConnections)")
                // Sharing the connection, the first transfer is no longer paused: its response waits in hookproxy,
                // under the shared bound, so the connection's other streams never wait on it.
                #expect(await eventually(timeout: .seconds(15)) { proxy.server.multiplexedBacklogBytes > 2 << 20 },
                        "buffered: \(proxy.server.multiplexedBacklogBytes)")
                unread.startReading()
                let whole = try await unread.response(timeout: .seconds(60))
                #expect(whole.body.count == Self.size, "\(whole.failure ?? "") \(proxy.recorder.records.compactMap(\.error))")
                #expect(await eventually(timeout: .seconds(10)) { proxy.server.multiplexedBacklogBytes == 0 })
            }
        }
    }
}
