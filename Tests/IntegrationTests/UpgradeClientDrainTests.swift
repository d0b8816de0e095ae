import Foundation
import ProxyModel
@testable import ProxyServer
import ProxyTestSupport
import Testing

/// Once the server side of a WebSocket session or a raw upgrade has finished, or while it is held back by a client
/// that takes nothing, hookproxy waits for the client to take what is queued for it, bounded by `--idle-timeout`
/// (`ClientDrainWatch`): the idle handler left at the upgrade, and a client that stopped reading held its connection
/// and its `--max-connections` slot for as long as it stayed connected. A client that reads slowly but keeps reading
/// still gets everything.
///
/// The server is a raw socket (`RawListener`) that answers 101 and floods the client; the client (`RawClient`, a small
/// `SO_RCVBUF`) reads nothing after the 101, so the flood fills every buffer on the way and the server's writes stall.
@Suite("upgrades: a client that stops reading after the server finished is let go", .timeLimit(.minutes(3)))
struct UpgradeClientDrainTests {
    /// `--idle-timeout`: a stalled client is let go one to two of them after its last progress (checked once per
    /// timeout); the tests allow 9 s, room for a loaded machine, against never.
    static let idleTimeoutMs = 1000

    /// The protocols: a WebSocket session, and a protocol relayed as bytes.
    enum Relay: String, CaseIterable, Sendable {
        case websocket, raw

        func handshake(port: Int) -> String {
            switch self {
            case .websocket:
                WebSocketWire.handshake("http://127.0.0.1:\(port)/", host: "127.0.0.1:\(port)")
            case .raw:
                rawRequest("GET http://127.0.0.1:\(port)/ HTTP/1.1", ["Host: 127.0.0.1:\(port)", "Upgrade: relay-test",
                                                                       "Connection: Upgrade"])
            }
        }

        var accept: String {
            switch self {
            case .websocket: WebSocketAdversarialTests.accept
            case .raw: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: relay-test\r\nConnection: Upgrade\r\n\r\n"
            }
        }

        /// What the server sends, `count` bytes of data: as unmasked binary frames of 60,000 bytes for a WebSocket.
        func payload(_ count: Int) -> [UInt8] {
            let data = pattern(count: count)
            guard self == .websocket else { return data }
            return stride(from: 0, to: count, by: 60_000).flatMap {
                WebSocketWire.frame(opcode: 2, Array(data[$0..<min(count, $0 + 60_000)]), masked: false)
            }
        }
    }

    @Test("the server floods a client that reads nothing, then resets: the client is closed within --idle-timeout, its slot freed",
          arguments: Relay.allCases)
    func stalledClientLetGo(relay: Relay) async throws {
        let listener = try RawListener()
        defer { listener.close() }
        try await withProxy({ $0.limits.clientIdleTimeoutMs = Self.idleTimeoutMs }) { proxy in
            // A send that waits 500 ms (SO_SNDTIMEO) throws: every buffer between the server and the client is full.
            let (client, server) = try await Self.upgrade(relay, proxy: proxy, listener: listener, receiveBuffer: 4096,
                                                          serverTimeout: .milliseconds(500))
            defer { client.close() }
            defer { server.close() }
            #expect(try await client.readResponse().status == 101)
            let chunk = relay.payload(240_000)
            let cap = 256 * 1024 * 1024
            var sent = 0
            let deadline = ContinuousClock.now + .seconds(30)
            // Until the session ends: the open session's watch may cut the stalled client first (a loaded machine
            // stretches the flood), and from then on hookproxy reads and drops what the server still sends, for a
            // bounded while (`UpstreamConnection.closeWhenSent`), as fast as it comes.
            while sent < cap, ContinuousClock.now < deadline, !Self.sessionEnded(proxy),
                  (try? await server.send(chunk)) != nil { sent += chunk.count }
            #expect(sent < cap, "the proxy took \(sent) bytes for a client that reads none")
            // The server is gone: an RST, which reaches the proxy whatever it has not read (a FIN would wait behind
            // the bytes still in the server's send buffer).
            server.reset()
            let closedAt = ContinuousClock.now
            let released = await eventually(timeout: .seconds(15)) {
                SocketCensus.count(localPort: proxy.port) == 0 && proxy.server.context.connections.openChannels.isEmpty
            }
            let took = ContinuousClock.now - closedAt
            #expect(released, "the proxy still holds the client's connection \(took) after the server left")
            #expect(took < .seconds(9), "let go after \(took) (--idle-timeout \(Self.idleTimeoutMs) ms)")
            // The open session's own watch may have let the client go before the server left (by the client, "… of
            // what the server sent"); else the watch after the server's end did (by the server).
            let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
            #expect(record.webSocket?.close?.reason.contains("the client took nothing for 1.0 s (--idle-timeout)") == true,
                    "\(String(describing: record.webSocket?.close))")
        }
    }

    @Test("a session that ends on the client's bad frame while the client reads nothing: its connection is closed within --idle-timeout")
    func endedSessionStalledClient() async throws {
        let listener = try RawListener()
        defer { listener.close() }
        try await withProxy({ $0.limits.clientIdleTimeoutMs = Self.idleTimeoutMs }) { proxy in
            let (client, server) = try await Self.upgrade(.websocket, proxy: proxy, listener: listener, receiveBuffer: 4096,
                                                          serverTimeout: .milliseconds(500))
            defer { client.close() }
            defer { server.close() }
            #expect(try await client.readResponse().status == 101)
            let chunk = Relay.websocket.payload(240_000)
            var sent = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while sent < 256 * 1024 * 1024, ContinuousClock.now < deadline, (try? await server.send(chunk)) != nil { sent += chunk.count }
            // The session ends (1002) with the flood still queued for the client, which reads none of it; unless the
            // open session's watch let the stalled client go first.
            try? await client.send(WebSocketWire.fragmentedPing())
            let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
            #expect(record.webSocket?.close?.code == 1002 || record.webSocket?.close?.reason.contains("took nothing") == true,
                    "\(String(describing: record.webSocket?.close))")
            let endedAt = ContinuousClock.now
            let released = await eventually(timeout: .seconds(15)) {
                SocketCensus.count(localPort: proxy.port) == 0 && proxy.server.context.connections.openChannels.isEmpty
            }
            let took = ContinuousClock.now - endedAt
            #expect(released, "the proxy still holds the client's connection \(took) after the session ended")
            #expect(took < .seconds(9), "let go after \(took) (--idle-timeout \(Self.idleTimeoutMs) ms)")
        }
    }

    @Test("the server sends 8 MiB and closes; a client reading slowly, with pauses, gets every byte and the close",
          arguments: Relay.allCases)
    func slowReaderGetsEverything(relay: Relay) async throws {
        let listener = try RawListener()
        defer { listener.close() }
        // 3 s: the client is watched from its first backlog on, while the server still sends, and a loaded machine
        // can hold its thread between two reads for over a second.
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 3 * Self.idleTimeoutMs }) { proxy in
            let payload = relay.payload(8 * 1024 * 1024)
            // The server answers, sends everything and closes, all on a thread of its own, and the client's whole
            // part is one step too: once the server has finished, a client that reads nothing for --idle-timeout
            // (1 s) is let go, and a busy cooperative pool could hold a test between two awaits for longer.
            let serving = listener.serving(readTimeout: .seconds(60)) { server in
                defer { server.close() }
                _ = try server.readHeadNow()
                try server.sendNow(Array(relay.accept.utf8))
                try server.sendNow(payload)
                server.close()
                return ContinuousClock.now
            }
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(10),
                                                     sending: relay.handshake(port: listener.port))
            defer { client.close() }
            let (status, received) = try await client.run { client in
                let status = try client.readResponseNow().status
                // About 2.5 MB/s: the client is still reading, for seconds, after the server closed.
                return (status, try client.readPacedNow(step: 256 * 1024, pause: .milliseconds(100),
                                                        slowUntil: .now + .seconds(60), deadline: .now + .seconds(60)))
            }
            let drained = ContinuousClock.now
            #expect(status == 101)
            let serverClosed = try await serving.value
            print("upgrade drain (\(relay)): the client took \(drained - serverClosed) after the server closed")
            #expect(received.count == payload.count)
            #expect(received == payload, "\(relay): the bytes differ")
            let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
            #expect(record.webSocket?.close?.by == .server)
            #expect(record.webSocket?.close?.reason == "server closed the connection", "\(String(describing: record.webSocket?.close))")
        }
    }

    @Test("the server floods a client that reads slowly, then resets: the client still gets every byte the proxy took, over many --idle-timeouts")
    func slowReaderAfterReset() async throws {
        let listener = try RawListener()
        defer { listener.close() }
        try await withProxy({ $0.limits.clientIdleTimeoutMs = Self.idleTimeoutMs }) { proxy in
            // A small receive buffer: each read the client makes opens its window, so the proxy's kernel sees it (a
            // large one lets a slow client read for seconds from its own buffer while nothing moves on the wire).
            let (client, server) = try await Self.upgrade(.raw, proxy: proxy, listener: listener, receiveBuffer: 64 * 1024,
                                                          serverTimeout: .milliseconds(500))
            defer { client.close() }
            defer { server.close() }
            #expect(try await client.readResponse().status == 101)
            let payload = Relay.raw.payload(16 * 1024 * 1024)
            let flooding = Task {
                var sent = 0
                while sent < payload.count, (try? await server.send(Array(payload[sent..<sent + 64 * 1024]))) != nil { sent += 64 * 1024 }
                server.reset()
                return ContinuousClock.now
            }
            // About 240 KB/s for 10 s (the proxy holds megabytes: its backlog and the kernel's stand still for longer
            // than one --idle-timeout at a time), then as fast as it comes.
            let received = try await client.readPaced(step: 48 * 1024, pause: .milliseconds(200),
                                                      slowUntil: .now + .seconds(10), deadline: .now + .seconds(60))
            let reset = await flooding.value
            print("upgrade drain after reset: the client took \(ContinuousClock.now - reset) and \(received.count) bytes")
            let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
            #expect(record.webSocket?.close?.by == .server)
            #expect(record.webSocket?.close?.reason.contains("--idle-timeout") == false, "\(String(describing: record.webSocket?.close))")
            #expect(received.count == record.webSocket?.receivedBytes)
            #expect(received == Array(payload.prefix(received.count)))
        }
    }

    /// The client's handshake through the proxy, and the server's 101, with no await between the steps the proxy
    /// times at --idle-timeout (1 s): the client connects and sends in one step, and the server answers on a thread
    /// started before. (A busy cooperative pool held a test between `connect` and `send` for longer than a second,
    /// the proxy closed the silent connection, and the server waited in vain: "no connection within 10 s".)
    /// Returns the client, its 101 unread, and the server's end. `serverTimeout` bounds the server's reads and sends.
    static func upgrade(_ relay: Relay, proxy: ProxyHarness, listener: RawListener, receiveBuffer: Int? = nil,
                        serverTimeout: Duration) async throws -> (client: RawClient, server: RawClient) {
        let serving = listener.serving(readTimeout: serverTimeout) { server in
            _ = try server.readHeadNow()
            try server.sendNow(Array(relay.accept.utf8))
            return server
        }
        let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(10), receiveBuffer: receiveBuffer,
                                                 sending: relay.handshake(port: listener.port))
        do {
            return (client, try await serving.value)
        } catch {
            client.close()
            throw error
        }
    }

    /// Whether the proxy recorded the session's end.
    static func sessionEnded(_ proxy: ProxyHarness) -> Bool {
        proxy.recorder.records.contains { $0.webSocket?.isOpening == false }
    }

    /// Reads a request head (to its empty line), bounded by the connection's read timeout.
    static func readHead(_ connection: RawClient) async throws -> String {
        var head: [UInt8] = []
        for _ in 0..<100 where !String(decoding: head, as: UTF8.self).contains("\r\n\r\n") {
            let more = try await connection.read(atLeast: 1)
            if more.isEmpty { break }
            head += more
        }
        return String(decoding: head, as: UTF8.self)
    }
}
