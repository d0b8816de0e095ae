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

    /// RFC 6455 §5.5.1: an end sends one close frame. A session whose close handshake was done (a server that has not
    /// closed its TCP connection yet) got a second close from hookproxy at shutdown, toward each end, and the log
    /// said hookproxy closed it with 1001 instead of the client's 1000.
    @Test("shutdown after a close handshake: neither end gets a second close frame, and the log keeps the client's close")
    func shutdownAfterCloseHandshake() async throws {
        let listener = try RawListener()
        defer { listener.close() }
        let proxy = try await ProxyHarness.start()
        let client: RawClient, server: RawClient
        do {
            client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(10))
            try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(listener.port)/", host: "127.0.0.1:\(listener.port)"))
            server = try await listener.accept(timeout: .seconds(10), readTimeout: .seconds(10))
        } catch {
            await proxy.stop()
            throw error
        }
        defer { client.close(); server.close() }
        do {
            _ = try await UpgradeClientDrainTests.readHead(server)
            try await server.send(WebSocketAdversarialTests.accept)
            #expect(try await client.readResponse().status == 101)
            let bye = WebSocketWire.frame(opcode: 8, [0x03, 0xE8] + Array("bye".utf8))
            try await client.send(bye)
            #expect(try await server.read(atLeast: bye.count) == bye, "the server got the client's close")
            let done = WebSocketWire.frame(opcode: 8, [0x03, 0xE8] + Array("done".utf8), masked: false)
            try await server.send(done)
            #expect(try await client.read(atLeast: done.count) == done, "the client got the server's close")
        } catch {
            await proxy.stop()
            throw error
        }
        await proxy.stop()
        let toClient = try await client.readToEOF()
        let toServer = try await server.readToEOF()
        #expect(toClient.isEmpty, "the client got \(toClient.count) bytes after its close handshake: \(toClient.prefix(32))")
        #expect(toServer.isEmpty, "the server got \(toServer.count) bytes after its close handshake: \(toServer.prefix(32))")
        let record = proxy.recorder.records.first { $0.webSocket != nil && $0.webSocket?.isOpening == false }
        #expect(record?.webSocket?.close == WebSocketLog.Close(code: 1000, reason: "bye", by: .client),
                "\(String(describing: record?.webSocket?.close))")
    }
}
