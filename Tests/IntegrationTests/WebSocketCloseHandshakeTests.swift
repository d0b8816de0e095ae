import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// The close handshake through the proxy (RFC 6455 §7.1): once both ends' close frames passed, a server that keeps
/// its connection open is let go 2 s later; an end that a close frame went to and that never answers, keeping its
/// connection open, is let go at `--idle-timeout` (`CloseAnswerWatch`). Before, either held the session and both
/// connections for as long as the silent peer stayed connected.
@Suite("WebSocket close handshake against peers that do not finish it (issue 15)", .timeLimit(.minutes(3)))
struct WebSocketCloseHandshakeTests {
    static let idleTimeoutMs = 1000

    static func shortIdle(_ configuration: inout ProxyConfiguration) {
        configuration.limits.clientIdleTimeoutMs = idleTimeoutMs
        configuration.upstream.idleTimeoutMs = idleTimeoutMs
    }

    @Test("a server that never answers the client's close frame and keeps its connection open: both connections close at --idle-timeout, and the log says why")
    func serverNeverAnswersTheClose() async throws {
        let script: [MisbehavingOrigin.Step] = [.send(Array(WebSocketAdversarialTests.accept.utf8)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 2000; $0.upstream.idleTimeoutMs = 2000 }) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                let start = ContinuousClock.now
                try await client.send(WebSocketWire.close(1000, "bye"))
                let rest = try await client.readToEOF()
                let took = ContinuousClock.now - start
                client.close()
                #expect(WebSocketWire.frames(rest).isEmpty, "the client gets no close frame it did not get from the server")
                // At --idle-timeout (PeerProgressTests pin the 1¼ bound), not held while the peer stays connected: the
                // upper bound is loose because a loaded machine runs the checks late (a CI run: 4.3 s).
                #expect(took >= .milliseconds(1900) && took < .seconds(10), "let go after \(took) (--idle-timeout 2s)")
                // The server got the client's close frame, as the client sent it.
                #expect(await eventually(timeout: .seconds(10)) {
                    WebSocketWire.framesAfterHead(origin.received).contains { $0.closeCode == 1000 && $0.closeReason == "bye" }
                })
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1000 && record.webSocket?.close?.by == .client,
                        "the log keeps the close that passed: \(String(describing: record.webSocket?.close))")
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("the server did not answer the client's close frame: it sent and took nothing for 2.0 s (--idle-timeout)") },
                        "\(notes)")
            }
        }
    }

    @Test("a server that sends frames after the client's close keeps the session until it stops: what it sends still reaches the client")
    func aServerStillSendingIsNotCutOff() async throws {
        // The server answers the close only after about 1.2 × --idle-timeout (2 s here), sending a frame every 0.3 s
        // meanwhile.
        var script: [MisbehavingOrigin.Step] = [.send(Array(WebSocketAdversarialTests.accept.utf8))]
        for index in 0..<8 {
            script += [.pause(milliseconds: 300), .send(WebSocketWire.text("late \(index)", masked: false))]
        }
        script += [.send(WebSocketWire.close(1000, "done too", masked: false)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 2000; $0.upstream.idleTimeoutMs = 2000 }) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                try await client.send(WebSocketWire.close(1000, "bye"))
                let frames = WebSocketWire.frames(try await client.readToEOF())
                client.close()
                #expect(frames.map(\.opcode) == Array(repeating: 1, count: 8) + [8], "\(frames)")
                #expect(frames.last?.closeReason == "done too")
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.receivedMessages == 8)
                #expect(!record.events.map(\.action).contains { $0.contains("did not answer") })
            }
        }
    }

    @Test("a server whose close the client answered, and that keeps its connection open: the session ends 2 s later, not at --idle-timeout")
    func serverKeepsItsSocketOpenAfterTheHandshake() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .send(Array(WebSocketAdversarialTests.accept.utf8) + WebSocketWire.close(4001, "server leaves", masked: false)), .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            // A long timeout: the session must not wait for it.
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 30_000; $0.upstream.idleTimeoutMs = 30_000 }) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                let close = try await client.read(atLeast: 2 + 2 + 13)
                #expect(WebSocketWire.frames(close).first?.closeCode == 4001)
                let start = ContinuousClock.now
                try await client.send(WebSocketWire.close(4001, "server leaves"))
                let rest = try await client.readToEOF()
                let took = ContinuousClock.now - start
                client.close()
                #expect(rest.isEmpty)
                #expect(took >= .milliseconds(1900) && took < .seconds(10), "the client's connection closed after \(took)")
                #expect(await eventually(timeout: .seconds(10)) {
                    WebSocketWire.framesAfterHead(origin.received).contains { $0.closeCode == 4001 }
                }, "the server got the client's answer")
                #expect(await eventually(timeout: .seconds(10)) { origin.openConnections == 0 },
                        "hookproxy closed the server's connection")
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 4001 && record.webSocket?.close?.by == .server)
                #expect(record.events.map(\.action).contains("the server kept its connection open 2.0 s after the close handshake: hookproxy closed it"),
                        "\(record.events.map(\.action))")
            }
        }
    }

    @Test("a client that never answers the server's close frame and keeps its connection open: both connections close at --idle-timeout, and the log says why")
    func clientNeverAnswersTheClose() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .send(Array(WebSocketAdversarialTests.accept.utf8) + WebSocketWire.close(1001, "going", masked: false)), .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 2000; $0.upstream.idleTimeoutMs = 2000 }) { proxy in
                // From before the handshake: the proxy relays the server's close with the 101 and starts its wait
                // then, so a clock started after `webSocket` returned ran short on a loaded machine (1.87 s).
                let start = ContinuousClock.now
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                let frames = WebSocketWire.frames(try await client.readToEOF())
                let took = ContinuousClock.now - start
                client.close()
                #expect(frames.map(\.closeCode) == [1001], "only the server's close frame: \(frames)")
                // At --idle-timeout (PeerProgressTests pin the 1¼ bound), not held while the peer stays connected: the
                // upper bound is loose because a loaded machine runs the checks late (a CI run: 4.3 s).
                #expect(took >= .milliseconds(1900) && took < .seconds(10), "let go after \(took) (--idle-timeout 2s)")
                #expect(await eventually(timeout: .seconds(10)) { origin.openConnections == 0 },
                        "hookproxy closed the server's connection")
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1001 && record.webSocket?.close?.by == .server)
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("the client did not answer the server's close frame: it sent and took nothing for 2.0 s (--idle-timeout)") },
                        "\(notes)")
            }
        }
    }

    // MARK: peers that answer slowly (found by a hostile review of the first version)

    /// Reads 8 KiB every 20 ms (~400 KB/s), sending nothing, until it has the `expected` bytes (frames ending with a
    /// close frame); then sends `answer` (its own close frame), and reads to the end. Returns the frames it read.
    static func readSlowlyThenAnswer(_ peer: RawClient, expected: Int, answer: [UInt8]) throws -> [WebSocketWire.Frame] {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let chunk = try peer.readSomeNow(upTo: 8192)
            if chunk.isEmpty { break }
            received += chunk
            if received.count >= expected {
                try peer.sendNow(answer)
                while try !peer.readSomeNow(upTo: 65536).isEmpty {}
                break
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return WebSocketWire.frames(received)
    }

    /// The frames `peer` reads until its connection ends (on its own thread).
    static func framesToEnd(_ peer: RawClient) throws -> [WebSocketWire.Frame] {
        var got: [UInt8] = []
        while true {
            let chunk = try peer.readSomeNow(upTo: 65536)
            if chunk.isEmpty { return WebSocketWire.frames(got) }
            got += chunk
        }
    }

    static let frameCount = 24
    static let payload = [UInt8](repeating: 9, count: 65536)
    /// The frames' bytes and a close frame's, masked (the client's) or not.
    static func backlogBytes(masked: Bool, closeReason: String) -> Int {
        frameCount * WebSocketWire.frame(opcode: 2, payload, masked: masked).count
            + WebSocketWire.close(1000, closeReason, masked: masked).count
    }

    /// The server buffers little (32 KiB): what it has taken is what its kernel acknowledged, give or take that much.
    /// (A reader that lags its kernel's buffer by more than --idle-timeout is let go; at the default 60 s that is
    /// megabytes at a crawl.)
    @Test("a client whose close frame reaches a slowly reading server late (behind 1.5 MiB): the server still gets everything and answers; nothing is cut at --idle-timeout")
    func closeBehindABacklogToTheServer() async throws {
        let origin = try RawListener(receiveBuffer: 32768)
        let server = origin.serving(readTimeout: .seconds(60)) { server in
            _ = try server.readHeadNow()
            try server.sendNow(Array(WebSocketAdversarialTests.accept.utf8))
            return try Self.readSlowlyThenAnswer(server, expected: Self.backlogBytes(masked: true, closeReason: "client-bye"),
                                                 answer: WebSocketWire.close(1000, "server-bye", masked: false))
        }
        try await withProxy(Self.shortIdle) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(30),
                                                     sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                      host: "127.0.0.1:\(origin.port)"))
            defer { client.close() }
            let frames = (0..<Self.frameCount).flatMap { _ in WebSocketWire.frame(opcode: 2, Self.payload) }
            let answer = try await client.run { client -> [WebSocketWire.Frame] in
                _ = try client.readResponseNow()
                try client.sendNow(frames + WebSocketWire.close(1000, "client-bye"))
                return try Self.framesToEnd(client)
            }
            let atServer = try await server.value
            #expect(atServer.filter { $0.opcode == 2 }.map(\.payload.count).reduce(0, +) == Self.frameCount * Self.payload.count,
                    "\(atServer.count) frames")
            #expect(atServer.last?.closeReason == "client-bye")
            #expect(answer.map(\.closeReason) == ["server-bye"], "the client gets the server's answer")
        }
    }

    @Test("a server whose close frame reaches a slowly reading client late (behind 1.5 MiB): the client's answer still reaches the server")
    func closeBehindABacklogToTheClient() async throws {
        let origin = try RawListener()
        let server = origin.serving(readTimeout: .seconds(60)) { server -> [WebSocketWire.Frame] in
            _ = try server.readHeadNow()
            try server.sendNow(Array(WebSocketAdversarialTests.accept.utf8))
            for _ in 0..<Self.frameCount { try server.sendNow(WebSocketWire.frame(opcode: 2, Self.payload, masked: false)) }
            try server.sendNow(WebSocketWire.close(1000, "server-bye", masked: false))
            return try Self.framesToEnd(server)
        }
        try await withProxy(Self.shortIdle) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(30), receiveBuffer: 65536,
                                                     sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                      host: "127.0.0.1:\(origin.port)"))
            defer { client.close() }
            let read = try await client.run { client -> [WebSocketWire.Frame] in
                _ = try client.readResponseNow()
                return try Self.readSlowlyThenAnswer(client, expected: Self.backlogBytes(masked: false, closeReason: "server-bye"),
                                                     answer: WebSocketWire.close(1000, "client-bye"))
            }
            #expect(read.filter { $0.opcode == 2 }.count == Self.frameCount)
            #expect(read.last?.closeReason == "server-bye")
            let atServer = try await server.value
            #expect(atServer.map(\.closeReason) == ["client-bye"], "the server gets the client's answer: \(atServer)")
        }
    }

    @Test("a client answering the server's close after a big message it sends slowly, and a close frame it trickles: both reach the server")
    func slowAnswersFromTheClient() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .send(Array(WebSocketAdversarialTests.accept.utf8) + WebSocketWire.close(1001, "going", masked: false)), .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy(Self.shortIdle) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                defer { client.close() }
                _ = try await client.read(atLeast: 2 + 2 + 5)
                // 64 KiB in 16 pieces 150 ms apart (2.4 s, over --idle-timeout), then the close a byte every 250 ms.
                let message = WebSocketWire.frame(opcode: 2, [UInt8](repeating: 3, count: 65536))
                let close = WebSocketWire.close(1001, "ok")
                try await client.run { client in
                    let piece = message.count / 16 + 1
                    for start in stride(from: 0, to: message.count, by: piece) {
                        try client.sendNow(Array(message[start..<min(message.count, start + piece)]))
                        Thread.sleep(forTimeInterval: 0.15)
                    }
                    for byte in close {
                        try client.sendNow([byte])
                        Thread.sleep(forTimeInterval: 0.25)
                    }
                }
                #expect(await eventually(timeout: .seconds(20)) {
                    WebSocketWire.framesAfterHead(origin.received).map(\.opcode) == [2, 8]
                }, "\(WebSocketWire.framesAfterHead(origin.received).map(\.opcode))")
                #expect(WebSocketWire.framesAfterHead(origin.received).first?.payload.count == 65536)
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(!record.events.map(\.action).contains { $0.contains("did not answer") }, "\(record.events.map(\.action))")
            }
        }
    }
}
