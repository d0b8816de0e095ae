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
            try await withProxy(Self.shortIdle) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                let start = ContinuousClock.now
                try await client.send(WebSocketWire.close(1000, "bye"))
                let rest = try await client.readToEOF()
                let took = ContinuousClock.now - start
                client.close()
                #expect(WebSocketWire.frames(rest).isEmpty, "the client gets no close frame it did not get from the server")
                #expect(took >= .milliseconds(Self.idleTimeoutMs - 100) && took < .seconds(10), "let go after \(took)")
                // The server got the client's close frame, as the client sent it.
                #expect(await eventually(timeout: .seconds(10)) {
                    WebSocketWire.framesAfterHead(origin.received).contains { $0.closeCode == 1000 && $0.closeReason == "bye" }
                })
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1000 && record.webSocket?.close?.by == .client,
                        "the log keeps the close that passed: \(String(describing: record.webSocket?.close))")
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("the server did not answer the client's close frame: it sent nothing for 1.0 s (--idle-timeout)") },
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
            try await withProxy(Self.shortIdle) { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port, readTimeout: .seconds(20))
                let start = ContinuousClock.now
                let frames = WebSocketWire.frames(try await client.readToEOF())
                let took = ContinuousClock.now - start
                client.close()
                #expect(frames.map(\.closeCode) == [1001], "only the server's close frame: \(frames)")
                #expect(took >= .milliseconds(Self.idleTimeoutMs - 100) && took < .seconds(10), "let go after \(took)")
                #expect(await eventually(timeout: .seconds(10)) { origin.openConnections == 0 },
                        "hookproxy closed the server's connection")
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: origin.port))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1001 && record.webSocket?.close?.by == .server)
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("the client did not answer the server's close frame: it sent nothing for 1.0 s (--idle-timeout)") },
                        "\(notes)")
            }
        }
    }
}
