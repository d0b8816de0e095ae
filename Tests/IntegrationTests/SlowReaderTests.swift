import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// A client that reads a download slowly but steadily gets all of it, however long the kernel's full send buffer
/// keeps the proxy's socket from taking more (`IdleWatch` counts what the client acknowledged). The client is a raw
/// socket on a thread of its own, paced by that thread's clock.
@Suite("A slow, steady reader is never an idle client", .timeLimit(.minutes(3)))
struct SlowReaderTests {
    /// Found by a hostile review: at 200 KB/s with `--idle-timeout 2s`, a download was cut at about 4 MB, the log
    /// saying `client read nothing for 2.0 s`.
    @Test("a 6 MB download read at ~400 KB/s with --idle-timeout 1s arrives whole")
    func slowDownloadArrivesWhole() async throws {
        let size = 6_000_000
        try await withOrigin { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 1000 }) { proxy in
                let head = "GET http://127.0.0.1:\(origin.port)/bytes/\(size) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), sending: head)
                defer { client.close() }
                let received = try await client.run { client -> Int in
                    var count = 0
                    let deadline = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < deadline {
                        let chunk = try client.readSomeNow(upTo: 8192)
                        if chunk.isEmpty { break }
                        count += chunk.count
                        Thread.sleep(forTimeInterval: 0.02)
                    }
                    return count
                }
                // The head, then the whole body: the connection ended only because the test's deadline or the end came.
                #expect(received > size, "received \(received) bytes of a \(size)-byte body and its head")
                let records = await Hooks.records(proxy)
                #expect(records.first?.error == nil, "\(String(describing: records.first?.error))")
            }
        }
    }
}
