import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A second hostile pass over WebSocket sessions (issue 15), on what the proxy makes of messages: peers that break
/// RFC 6455's message rules, compressed messages that never end, and `permessage-deflate` streams that end their
/// messages with a final DEFLATE block.
@Suite("WebSocket messages from hostile peers", .timeLimit(.minutes(3)))
struct WebSocketMessageRulesTests {
    /// The frames of a message that breaks the rules, after one good message ("fine").
    enum Breach: String, CaseIterable, Sendable {
        case continuationWithoutStart, messageInsideFragmented, reservedDataOpcode, reservedControlOpcode

        var frames: [UInt8] {
            switch self {
            case .continuationWithoutStart: WebSocketWire.frame(opcode: 0, Array("orphan".utf8))
            case .messageInsideFragmented:
                WebSocketWire.frame(opcode: 1, Array("first half".utf8), fin: false) + WebSocketWire.text("intruder")
            case .reservedDataOpcode: WebSocketWire.frame(opcode: 3, Array("three".utf8))
            case .reservedControlOpcode: WebSocketWire.frame(opcode: 0xB, Array("eleven".utf8))
            }
        }

        /// The message the breach cut short: its first frame went on to the server, so the log lists it, truncated.
        var cutShort: [String] { self == .messageInsideFragmented ? ["first half"] : [] }

        var reason: String {
            switch self {
            case .continuationWithoutStart: "a continuation frame with no message to continue"
            case .messageInsideFragmented: "a new message inside a fragmented one"
            case .reservedDataOpcode: "reserved opcode 3"
            case .reservedControlOpcode: "reserved opcode 11"
            }
        }
    }

    /// These were relayed, and logged as messages they were not: a continuation with nothing before it was added to
    /// the last message (logged again, its size counted twice), a message inside a fragmented one wiped the first
    /// from the log, a reserved opcode was logged as a message of that opcode.
    @Test("frames that break the message rules end the session with 1002 naming the breach; the log lists only real messages",
          arguments: Breach.allCases)
    func breachEndsTheSession(breach: Breach) async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy({ $0.captureBodies = true }) { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                defer { client.close() }
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                try await client.send(WebSocketWire.text("fine"))
                #expect(WebSocketWire.payloads(try await client.read(atLeast: 6)) == [Array("fine".utf8)])
                try await client.send(breach.frames)
                #expect(await client.waitForClose(), "\(breach): the client's connection closes")
                client.close()  // as a client does after the close frame: hookproxy lingers until then (LingeringClose)
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                let session = try #require(record.webSocket)
                #expect(session.close?.code == 1002, "\(breach): \(String(describing: session.close))")
                #expect(session.close?.reason == "hookproxy: bad frame from the client: \(breach.reason)",
                        "\(breach): \(String(describing: session.close))")
                let cutShort = breach.cutShort
                #expect(session.sentMessages == 1 + cutShort.count && session.sentBytes == 4 + cutShort.joined().utf8.count,
                        "\(breach): \(session.sentMessages) \(session.sentBytes)")
                #expect(session.messages.map { String(decoding: $0.data, as: UTF8.self) } == ["fine", "fine"] + cutShort, "\(breach)")
                #expect(session.messages.map(\.truncated) == [false, false] + cutShort.map { _ in true }, "\(breach)")
                #expect(await WebSocketAdversarialTests.socketsReleased(proxy, upstreamPort: server.port))
            }
        }
    }

    /// RFC 7692 §7.2.3.4 lets a sender end a message with a DEFLATE block whose BFINAL bit is set; the next message
    /// then starts a new stream. hookproxy's inflater stopped at the first such block: every later message of that
    /// direction inflated to nothing, so the log showed it empty and, with a `websocket` rule editing that direction,
    /// hookproxy sent the server an empty message in its place.
    @Test("messages ending in a final DEFLATE block: a rule edits each of them, the server gets them whole, the log shows them")
    func finalDeflateBlocks() async throws {
        let rules = """
            - name: ws-edit
              match: { host: localhost, websocket: true }
              websocket:
                to_server: { replace: [{ text: "one", with: "ONE" }] }
            """
        try await WebSocketTests.deflateScenario("deflate-bfinal", rules: rules) { out, proxy in
            let expected = ["ONE " * 20, "two " * 20 + "ONE", "three " * 20]
            #expect(out["server_received"] as? [String] == expected, "\(out)")
            #expect(out["replies"] as? [String] == expected, "\(out)")
            let record = try #require(await WebSocketTests.sessionRecord(proxy))
            let sent = record.webSocket?.messages.filter { $0.direction == .send }.map { String(decoding: $0.data, as: UTF8.self) }
            #expect(sent == expected)
            #expect(record.webSocket?.sentBytes == expected.reduce(0) { $0 + $1.utf8.count })
        }
    }

    /// Every compressed message was kept whole (up to 64 MiB, each direction) to be inflated for the log at its last
    /// frame, and the buffer stayed with the session for its life: a few clients sending big compressed messages
    /// (or one that never ends) grew the proxy by that much each. Now a message is inflated as its frames come, and
    /// only what the log keeps (the capture limit) is held.
    @Test("compressed messages that do not end yet: the real binary's memory stays flat; once they end the log has their inflated size")
    func unfinishedCompressedMessagesAreNotHeld() async throws {
        let sessions = 3, frames = 32, chunk = 1 << 20
        let listener = try RawListener()
        defer { listener.close() }
        let directory = try TemporaryDirectory()
        let jsonl = directory.path + "/log.jsonl"
        try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--quiet", "--no-ui", "--jsonl", jsonl,
                                         "--capture-limit", "64KiB"], directory: directory) { proxy in
            let pid = proxy.process.processIdentifier
            let port = try #require(Int(proxy.proxyURL.split(separator: ":").last ?? ""))
            // The server takes the handshake, accepts permessage-deflate, and reads everything, counting it.
            let drained = Counter()
            let serving = Task {
                var connections: [RawClient] = []
                for _ in 0..<sessions {
                    let connection = try await Self.step("the server's accept") { try await listener.accept(timeout: .seconds(60), readTimeout: .seconds(60)) }
                    connections.append(connection)
                    _ = try await Self.step("the handshake reaching the server") { try await UpgradeClientDrainTests.readHead(connection) }
                    // (`dropLast()`: "\r\n" is one Character)
                    try await connection.send(String(WebSocketAdversarialTests.accept.dropLast()) + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
                    Task { while let bytes = try? await connection.read(atLeast: 1), !bytes.isEmpty { drained.add(bytes.count) } }
                }
                return connections
            }
            let before = try #require(ProcessMeter(pid: pid)).residentBytes
            let data = pattern(count: chunk)
            let piece = Self.storedBlocks(data)
            var clients: [RawClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<sessions {
                let client = try await RawClient.connect(port: port, readTimeout: .seconds(60))
                clients.append(client)
                try await client.send(rawRequest("GET http://127.0.0.1:\(listener.port)/ HTTP/1.1", [
                    "Host: 127.0.0.1:\(listener.port)", "Upgrade: websocket", "Connection: Upgrade",
                    "Sec-WebSocket-Key: \(WebSocketWire.key)", "Sec-WebSocket-Version: 13",
                    "Sec-WebSocket-Extensions: permessage-deflate",
                ]))
                #expect(try await Self.step("the 101") { try await client.readResponse() }.status == 101)
                try await client.send(Self.zeroMasked(opcode: 2, rsv1: true, fin: false, piece))
                for _ in 1..<frames { try await client.send(Self.zeroMasked(opcode: 0, fin: false, piece)) }
            }
            let serverConnections = try await Self.step("the server's side") { try await serving.value }
            defer { for connection in serverConnections { connection.close() } }
            let wire = sessions * frames * (piece.count + 14)
            #expect(await eventually(timeout: .seconds(60)) { drained.value >= wire }, "the server got \(drained.value) of \(wire) bytes")
            let grown = try #require(ProcessMeter(pid: pid)).residentBytes - before
            print("unfinished compressed messages: \(sessions) × \(frames) MiB relayed; RSS grew \(grown >> 20) MiB")
            #expect(grown < 40 * 1024 * 1024, "the proxy's RSS grew by \(grown >> 20) MiB holding \(sessions * frames) MiB of unfinished messages")
            // The messages end, and the sessions: the log has each at its inflated size, its first 64 KiB kept.
            for client in clients {
                // A sync flush's last byte: the empty stored block whose `00 00 FF FF` the sender takes off.
                try await client.send(Self.zeroMasked(opcode: 0, fin: true, [0x00]) + WebSocketWire.frame(opcode: 8, [0x03, 0xE8]))
            }
            for client in clients { client.close() }
            let logged = await eventually(timeout: .seconds(30)) {
                ((try? String(contentsOfFile: jsonl, encoding: .utf8)) ?? "").split(separator: "\n").count == sessions
            }
            #expect(logged)
            let lines = ((try? String(contentsOfFile: jsonl, encoding: .utf8)) ?? "").split(separator: "\n")
            for line in lines {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let session = try #require(object["websocket"] as? [String: Any])
                let messages = try #require(session["messages"] as? [[String: Any]])
                #expect(messages.count == 1)
                #expect(messages.first?["size"] as? Int == frames * chunk, "\(messages.first?["size"] ?? "none")")
                #expect(messages.first?["truncated"] as? Bool == true)
                let kept = (messages.first?["data"] as? String).flatMap { Data(base64Encoded: $0) }
                #expect(kept.map(Array.init) == Array(data.prefix(64 * 1024)), "the log keeps the first 64 KiB inflated: \(kept.map { Array($0.prefix(8)) } ?? [])")
            }
        }
    }

    /// `body`, its error naming `name`.
    static func step<T>(_ name: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw TestSupportError("\(name): \(error)") }
    }

    /// `bytes` as raw DEFLATE stored blocks (no BFINAL): valid compressed data of any size, made without zlib.
    static func storedBlocks(_ bytes: [UInt8]) -> [UInt8] {
        stride(from: 0, to: bytes.count, by: 65_535).flatMap { start -> [UInt8] in
            let block = bytes[start..<min(bytes.count, start + 65_535)]
            let length = UInt16(block.count)
            return [0x00, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)] + block
        }
    }

    /// A client frame masked with the key 0 0 0 0 (the payload goes as it is: large frames cost no masking here).
    static func zeroMasked(opcode: UInt8, rsv1: Bool = false, fin: Bool, _ payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode]
        if payload.count < 126 {
            bytes.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(0x80 | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (UInt64($0) * 8)) & 0xFF) }
        }
        return bytes + [0, 0, 0, 0] + payload
    }

    /// A count several tasks add to.
    final class Counter: Sendable {
        private let total = Mutex(0)
        func add(_ count: Int) { total.withLock { $0 += count } }
        var value: Int { total.withLock { $0 } }
    }
}

private func * (text: String, count: Int) -> String { String(repeating: text, count: count) }
