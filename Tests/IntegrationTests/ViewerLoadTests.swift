import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import ProxyUI
import Testing

/// The viewer's heavy answers (a HAR download, the list with bodies) serialize up to the store's whole byte budget.
/// Made on the event loop, they stalled every connection of that loop for as long (seconds): a viewer tab's download
/// held up the traffic it was showing. They are made off the loop now.
@Suite("viewer: heavy answers off the event loop", .timeLimit(.minutes(2)))
struct ViewerLoadTests {
    @Test("a proxied exchange on the viewer's event loop completes while a large HAR is still being built")
    func harDoesNotStallTheLoop() async throws {
        try await withProxyAndOrigin({ configuration in
            configuration.viewer = ViewerSettings()
            configuration.eventLoops = 1  // the viewer request and the proxied exchange share the one loop
        }) { proxy, origin in
            let store = try #require(proxy.server.viewer).store
            // 48 MiB of binary bodies: base64 in the HAR, seconds of work in a debug build.
            let body = CapturedBody(bytes: (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
            for id in 1...48 {
                store.record(FlowRecord(
                    id: 1_000_000 + id, start: Date(), client: "test",
                    request: RequestHead(method: "GET", url: ProxyURL(string: "http://bulk.test/\(id)")!),
                    url: "http://bulk.test/\(id)",
                    response: ResponseHead(status: 200, headers: [("Content-Type", "application/octet-stream")]),
                    responseBodySize: body.bytes.count, responseBody: body))
            }
            let order = OrderBox()
            let har = Task {
                let response = try await withRawClient(proxy, readTimeout: .seconds(60)) { client in
                    try await client.send(rawRequest("GET /api/har HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
                    return try await client.readResponse()
                }
                order.append("har")
                return response
            }
            try await Task.sleep(for: .milliseconds(300))  // the HAR request is in
            let through = try await curlThrough(proxy, ["\(origin.baseURL)/status/200"], timeout: .seconds(60))
            order.append("proxied")
            #expect(through.exitCode == 0, "\(through.stderr)")
            let response = try await har.value
            #expect(response.status == 200)
            #expect(response.body.count > 48 << 20, "the HAR holds every body")
            #expect(order.values == ["proxied", "har"], "the proxied exchange waited for the HAR: \(order.values)")
        }
    }
}

private final class OrderBox: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func append(_ item: String) { lock.withLock { items.append(item) } }
    var values: [String] { lock.withLock { items } }
}
