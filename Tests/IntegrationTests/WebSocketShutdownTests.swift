import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// An open WebSocket session when hookproxy shuts down: both ends hear why (a 1001 close frame, as from a server going
/// down), and the log does not say the client closed it. A real server (`TestWebSocketServer`), a raw client.
@Suite("WebSocket sessions at shutdown", .timeLimit(.minutes(1)))
struct WebSocketShutdownTests {
    @Test("shutdown sends both ends of an open session a 1001 close and logs it as hookproxy's doing")
    func shutdownSays1001() async throws {
        try await TestWebSocketServer.with { server in
            let proxy = try await ProxyHarness.start()
            let client: RawClient
            do {
                client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                #expect(await eventually(timeout: .seconds(10)) {
                    proxy.recorder.records.contains { $0.webSocket?.isOpening == true }
                }, "the session is open")
            } catch {
                await proxy.stop()
                throw error
            }
            defer { client.close() }
            await proxy.stop()
            let bytes = try await client.readToEOF()
            // an unmasked close frame: 0x88, length, then the code 1001 and the reason
            #expect(bytes.count >= 4 && bytes[0] == 0x88 && bytes[2] == 0x03 && bytes[3] == 0xE9, "the client got \(bytes.prefix(32))")
            #expect(String(decoding: bytes.dropFirst(4), as: UTF8.self) == "hookproxy: shutting down")
            #expect(await eventually(timeout: .seconds(10)) { server.records.clientCloseCodes == [1001] },
                    "the server got \(server.records.clientCloseCodes)")
            let record = proxy.recorder.records.first { $0.webSocket != nil && $0.webSocket?.isOpening == false }
            #expect(record?.webSocket?.close == WebSocketLog.Close(code: 1001, reason: "hookproxy: shutting down", by: .server),
                    "\(String(describing: record?.webSocket?.close))")
        }
    }
}
