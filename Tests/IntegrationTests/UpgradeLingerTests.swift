import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// The end of a WebSocket session whose peers are still busy: a peer that reads slowly while it keeps sending gets
/// every byte queued for it and the close frame (the lingering close waits while the kernel still sends it data,
/// however long past `--idle-timeout` that is), and a client cut for taking nothing leaves its server a close frame.
/// Peers are raw sockets on threads of their own (`RawClient.run`, `RawListener.serving`), paced by the clock of a
/// thread, not of the cooperative pool.
@Suite("WebSocket: the end while peers are busy (issue 15)", .timeLimit(.minutes(3)))
struct UpgradeLingerTests {
    static let frameCount = 24
    static let payload = [UInt8](repeating: 5, count: 65536)
    static let chatter = String(repeating: "c", count: 100)

    /// Reads at most 8 KiB every 30 ms (~270 KB/s) until the peer closes, sending `chatter` after each read, as a
    /// chat client does until it sees the close frame. Returns what it read, and the error that ended it, if any.
    static func readSlowlyWhileSending(_ peer: RawClient, chatter: [UInt8]) -> (bytes: [UInt8], error: String?) {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(60)
        do {
            while ContinuousClock.now < deadline {
                let chunk = try peer.readSomeNow(upTo: 8192)
                if chunk.isEmpty { return (received, nil) }
                received += chunk
                try? peer.sendNow(chatter)  // refused once hookproxy closed; what was read is what counts
                Thread.sleep(forTimeInterval: 0.03)
            }
            return (received, "no end within 60 s")
        } catch {
            return (received, "\(error)")
        }
    }

    /// Checks that a slow reader ended cleanly with every binary byte sent to it, then the close frame 1000 `reason`.
    static func expectEverything(_ outcome: (bytes: [UInt8], error: String?), closedWith reason: String,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(outcome.error == nil, "\(outcome.error ?? "")", sourceLocation: sourceLocation)
        let frames = WebSocketWire.frames(outcome.bytes)
        #expect(frames.filter { $0.opcode == 2 }.map(\.payload.count).reduce(0, +) == frameCount * payload.count,
                "\(outcome.bytes.count) bytes", sourceLocation: sourceLocation)
        #expect(frames.last?.closeCode == 1000 && frames.last?.closeReason == reason, "\(String(describing: frames.last))",
                sourceLocation: sourceLocation)
    }

    /// Found by a hostile review: the lingering close toward the client was bounded by one `--idle-timeout` from the
    /// session's end, so a client still reading slowly (and still sending) was closed on; its unread bytes made that
    /// close a reset, and the reset destroyed the tail and the close frame.
    @Test("a client that reads slowly and keeps sending gets everything and the server's close frame, long after the session ended")
    func slowClientGetsTheTail() async throws {
        let origin = try RawListener()
        let server = origin.serving(readTimeout: .seconds(60)) { server in
            _ = try server.readHeadNow()
            try server.sendNow(Array(WebSocketAdversarialTests.accept.utf8))
            for _ in 0..<Self.frameCount { try server.sendNow(WebSocketWire.frame(opcode: 2, Self.payload, masked: false)) }
            try server.sendNow(WebSocketWire.close(1000, "bye", masked: false))
            server.shutdownWrite()
            while try !server.readSomeNow(upTo: 65536).isEmpty {}
            server.close()
        }
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 1000 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), receiveBuffer: 65536,
                                                     sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                      host: "127.0.0.1:\(origin.port)"))
            defer { client.close() }
            let (status, outcome) = try await client.run { client in
                (try client.readResponseNow().status, Self.readSlowlyWhileSending(client, chatter: WebSocketWire.text(Self.chatter)))
            }
            #expect(status == 101)
            Self.expectEverything(outcome, closedWith: "bye")
            try await server.value
        }
    }

    /// The same toward the server: once everything the client sent went out, the upstream connection lingered for one
    /// `--idle-timeout`, whatever the server was still taking.
    @Test("a server that reads slowly and keeps sending gets everything the client sent and its close frame, long after the client left")
    func slowServerGetsTheTail() async throws {
        let origin = try RawListener()
        let server = origin.serving(readTimeout: .seconds(60)) { server in
            _ = try server.readHeadNow()
            try server.sendNow(Array(WebSocketAdversarialTests.accept.utf8))
            return Self.readSlowlyWhileSending(server, chatter: WebSocketWire.text(Self.chatter, masked: false))
        }
        // 2.5 s, not 1: the server's ~6 s of slow reading still outlasts it twice over, and a loaded run (the full
        // suite at width 8 on two cores) once left the server's thread unscheduled long enough that the 1 s linger
        // ended with 10 of its 24 frames read.
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 2500; $0.upstream.idleTimeoutMs = 2500 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20),
                                                     sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                      host: "127.0.0.1:\(origin.port)"))
            defer { client.close() }
            #expect(try await client.run { try $0.readResponseNow().status } == 101)
            let frames = (0..<Self.frameCount).flatMap { _ in WebSocketWire.frame(opcode: 2, Self.payload) }
            try await client.send(frames + WebSocketWire.close(1000, "client-bye"))
            // The client leaves (its FIN), reading what still comes until hookproxy closes.
            client.shutdownWrite()
            _ = await client.waitForClose()
            Self.expectEverything(try await server.value, closedWith: "client-bye")
        }
    }
    /// Found by a hostile review: progress was "the kernel sent the peer data within the timeout", and every
    /// retransmission to a peer whose kernel drops what comes counts as sent: such a client held its connection for
    /// about four times `--idle-timeout` (past the check altogether once retransmissions were spaced wider than it).
    /// Progress is now what the peer acknowledged.
    @Test("a client whose kernel drops what comes (it shrank its receive buffer) is let go after about --idle-timeout: retransmissions are no progress")
    func retransmissionsAreNoProgress() async throws {
        let origin = try RawListener()
        let server = origin.serving(readTimeout: .seconds(30)) { server in
            _ = try server.readHeadNow()
            try server.sendNow(Array(WebSocketAdversarialTests.accept.utf8))
            for _ in 0..<64 { try server.sendNow(WebSocketWire.frame(opcode: 2, Self.payload, masked: false)) }
            server.shutdownWrite()
            _ = try? server.readSomeNow(upTo: 65536)
        }
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 3000 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(30),
                                                     sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                      host: "127.0.0.1:\(origin.port)"))
            defer { client.close() }
            #expect(try await client.run { client in
                let status = try client.readResponseNow().status
                client.shrinkReceiveBuffer(to: 4096)
                return status
            } == 101)
            let start = ContinuousClock.now
            // Never read again. Let go at the first or second check (3-6 s); before, after 12 s.
            #expect(await eventually(timeout: .seconds(30)) { SocketCensus.count(localPort: proxy.port) == 0 })
            let held = ContinuousClock.now - start
            #expect(held < .seconds(9), "held for \(held)")
            _ = try? await server.value
        }
    }
}
