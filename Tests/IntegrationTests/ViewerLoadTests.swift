import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import ProxyUI
import Testing

/// The viewer's heavy answers (a HAR download, the list with bodies) serialize up to the store's whole byte budget.
/// Made on the event loop, they stalled every connection of that loop for as long (seconds): a viewer tab's download
/// held up the traffic it was showing. Once the store holds over `ViewerGate.inlineBytes` they are made off the loop
/// and written back on it; this checks that path answers in full, keeps the connection, and answers in order.
@Suite("viewer: heavy answers off the event loop", .timeLimit(.minutes(2)))
struct ViewerLoadTests {
    @Test("with over 1 MiB stored, API answers come whole and in order on one kept-alive connection")
    func deferredAnswersOnOneConnection() async throws {
        try await withProxyAndOrigin({ configuration in
            configuration.viewer = ViewerSettings()
        }) { proxy, _ in
            let store = try #require(proxy.server.viewer).store
            let body = CapturedBody(bytes: (0..<(600 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
            for id in 1...2 {
                store.record(FlowRecord(
                    id: 1_000_000 + id, start: Date(), client: "test",
                    request: RequestHead(method: "GET", url: ProxyURL(string: "http://bulk.test/\(id)")!),
                    url: "http://bulk.test/\(id)",
                    response: ResponseHead(status: 200, headers: [("Content-Type", "application/octet-stream")]),
                    responseBodySize: body.bytes.count, responseBody: body))
            }
            #expect(store.bytes >= 1 << 20, "the store must be past the inline threshold for this test")
            let host = "Host: 127.0.0.1:\(proxy.port)"
            let (har, flows, body2) = try await withRawClient(proxy, readTimeout: .seconds(60)) { client in
                // Pipelined: the second and third requests wait while the first answer is made off the loop.
                try await client.send(rawRequest("GET /api/har HTTP/1.1", [host])
                    + rawRequest("GET /api/flows HTTP/1.1", [host])
                    + rawRequest("GET /api/flows/1000002/response/body HTTP/1.1", [host]))
                return (try await client.readResponse(), try await client.readResponse(), try await client.readResponse())
            }
            #expect(har.status == 200)
            #expect(har.bodyText.contains("\"http://bulk.test/1\"") && har.bodyText.contains("\"http://bulk.test/2\""))
            #expect(flows.status == 200)
            #expect(flows.bodyText.contains("bulk.test/2"))
            #expect(body2.status == 200)
            #expect(body2.body == body.bytes, "the body comes back byte for byte")
        }
    }
}
