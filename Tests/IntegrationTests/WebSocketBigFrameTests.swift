import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Big WebSocket frames. NIO's frame decoder holds a frame whole until its last byte: each direction of every session
/// could hold up to 64 MiB (4 clients each sending one 60 MiB frame grew the proxy by 244 MB). hookproxy now cuts a
/// data frame over 1 MiB into fragments as its bytes come (RFC 6455 §5.4), in front of the decoder.
@Suite("WebSocket big frames", .timeLimit(.minutes(3)))
struct WebSocketBigFrameTests {
    static let fragment = 1 << 20

    enum Compression: String, CaseIterable, Sendable {
        /// No permessage-deflate; a binary message.
        case none
        /// permessage-deflate: the proxy inflates each message's fragments, one after the other, for the log; a text
        /// message.
        case deflate
        /// permessage-deflate and a `websocket` rule on the client's messages: the proxy inflates a text message
        /// whole, from its fragments, and compresses it again itself (too big to edit: nothing changes).
        case deflateEdited
    }

    @Test("a 20 MiB frame each way, plain and permessage-deflate: each peer gets the message byte for byte, and the log one message each way",
          arguments: Compression.allCases)
    func hugeFramesArriveWhole(compression: Compression) async throws {
        let rules = compression != .deflateEdited ? "" : """
            - name: ws-edit
              match: { host: localhost, websocket: true }
              websocket:
                to_server: { replace: [{ text: "~never~", with: "!" }] }
            """
        let environment = ["WS_COMPRESSION": compression == .none ? "" : "deflate", "WS_MESSAGE": compression == .none ? "binary" : "text"]
        try await WebSocketTests.deflateScenario("huge", rules: rules, deflate: compression != .none, environment: environment) { out, proxy in
            #expect(out["server_equal"] as? [Bool] == [true], "the server got the message as sent: \(out)")
            #expect(out["echoed"] as? Bool == true, "the client got the echo as sent: \(out)")
            let record = try #require(await WebSocketTests.sessionRecord(proxy))
            let session = try #require(record.webSocket)
            let size = 20 << 20
            #expect(session.sentMessages == 1 && session.receivedMessages == 1, "\(session.sentMessages) \(session.receivedMessages)")
            #expect(session.sentBytes == size && session.receivedBytes == size, "\(session.sentBytes) \(session.receivedBytes)")
            #expect(session.messages.map(\.direction) == [.send, .receive])
            #expect(session.messages.map(\.opcode) == (compression == .none ? [2, 2] : [1, 1]))
            #expect(session.messages.map(\.size) == [size, size])
            #expect(session.close?.code == 1000, "\(String(describing: session.close))")
            if compression == .deflateEdited {
                // The text message went through the rule (too big to edit) and hookproxy's compressor.
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("to_server message over") && $0.hasSuffix("bytes: sent unchanged") }, "\(notes)")
            }
        }
    }

    /// Each of 3 senders writes one 40 MiB binary frame (a client's masked, a server's not) to a receiver that reads
    /// 64 KiB at a time with a pause: the proxy held each frame whole (its decoder read the sender as fast as it
    /// wrote, 120 MiB in all, and the frame then waited for the slow receiver), and now holds about a fragment per
    /// direction, read only as fast as the receiver takes them.
    @Test("one 40 MiB frame from each of 3 peers to a peer that reads slowly: the real binary's memory stays far below one frame, and the payload arrives as sent, in fragments",
          arguments: [true, false])
    func bigFramesAreNotHeld(towardServer: Bool) async throws {
        let sessions = 3, size = 40 << 20
        let key: [UInt8] = [0x5A, 0xC3, 0x0F, 0x96]
        // The payload as it goes on the wire: masked by a client, as it is from a server.
        let plain = Self.bigPattern(count: size)
        let payload = towardServer ? Self.masked(plain, key) : plain
        let frame = Self.head(opcode: 2, length: size, key: towardServer ? key : nil) + payload
        let listener = try RawListener()
        defer { listener.close() }
        let directory = try TemporaryDirectory()
        try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--quiet", "--no-ui", "--capture-limit", "64KiB"],
                                        directory: directory) { proxy in
            let pid = proxy.process.processIdentifier
            let port = try #require(Int(proxy.proxyURL.split(separator: ":").last ?? ""))
            var pairs: [(client: RawClient, server: RawClient)] = []
            defer { for pair in pairs { pair.client.close(); pair.server.close() } }
            for _ in 0..<sessions {
                let client = try await RawClient.connect(port: port, readTimeout: .seconds(60))
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(listener.port)/", host: "127.0.0.1:\(listener.port)"))
                let server = try await listener.accept(timeout: .seconds(60), readTimeout: .seconds(60))
                pairs.append((client, server))
                _ = try await UpgradeClientDrainTests.readHead(server)
                try await server.send(WebSocketAdversarialTests.accept)
                #expect(try await client.readResponse().status == 101)
            }
            let before = try #require(ProcessMeter(pid: pid)).residentBytes
            let peak = Peak(before)
            let sampling = Task {
                while !Task.isCancelled {
                    if let now = ProcessMeter(pid: pid)?.residentBytes { peak.note(now) }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            defer { sampling.cancel() }
            let senders = pairs.map { pair in
                let sender = towardServer ? pair.client : pair.server
                return ThreadJob { try sender.sendNow(frame) }
            }
            let receivers = pairs.map { pair in
                let receiver = towardServer ? pair.server : pair.client
                return ThreadJob { () throws -> FrameFollower in
                    var follower = FrameFollower(expected: payload)
                    while follower.matched < size {
                        let bytes = try receiver.readSomeNow(upTo: 64 * 1024)
                        guard !bytes.isEmpty else { break }
                        follower.take(bytes)
                        Thread.sleep(forTimeInterval: 0.002)
                    }
                    return follower
                }
            }
            for sender in senders { try await sender.value }
            var followed: [FrameFollower] = []
            for receiver in receivers { followed.append(try await receiver.value) }
            sampling.cancel()
            let grown = peak.value - before
            print("big frames \(towardServer ? "to the server" : "to the client"): \(sessions) × \(size >> 20) MiB; peak RSS grew \(grown >> 20) MiB")
            #expect(grown < 32 << 20, "the proxy's RSS grew by \(grown >> 20) MiB relaying \(sessions) frames of \(size >> 20) MiB")
            for follower in followed {
                #expect(follower.matched == size && follower.mismatchAt == nil,
                        "\(follower.matched) payload bytes arrived; the first wrong one at \(String(describing: follower.mismatchAt))")
                let heads = follower.heads
                #expect(heads.count == size / Self.fragment, "\(heads.count) frames")
                #expect(heads.allSatisfy { $0.length <= Self.fragment }, "\(heads.map(\.length).max() ?? 0)")
                #expect(heads.map { $0.first & 0x0F } == [2] + Array(repeating: 0, count: max(0, heads.count - 1)))
                #expect(heads.map { $0.first & 0x80 != 0 } == Array(repeating: false, count: max(0, heads.count - 1)) + [true])
                #expect(heads.allSatisfy { $0.key == (towardServer ? key : nil) }, "a client's fragments keep its masking key")
            }
        }
    }

    @Test("a 5 MiB text frame a rule edits: held in fragments, edited whole, and echoed back in fragments; the log has one message each way")
    func editedBigFrame() async throws {
        let directory = try TemporaryDirectory()
        let store = try Hooks.store(directory, """
            rules:
              - name: ws-edit
                match: { host: 127.0.0.1, websocket: true }
                websocket:
                  to_server: { replace: [{ text: "hello", with: "HELLO" }] }
            """)
        let filler = String(repeating: "x", count: 5 << 20)
        let edited = Array(("HELLO " + filler).utf8)
        try await TestWebSocketServer.with { server in
            try await withHookProxy(rules: store) { proxy in
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(60))
                defer { client.close() }
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                let text = Array(("hello " + filler).utf8)
                let key: [UInt8] = [1, 2, 3, 4]
                try await client.send(Self.head(opcode: 1, length: text.count, key: key) + Self.masked(text, key))
                let follower = try await Self.follow(client, expecting: edited)
                #expect(follower.matched == edited.count && follower.mismatchAt == nil, "the echo is the edited message")
                #expect(follower.heads.map { $0.first & 0x0F } == [1, 0, 0, 0, 0, 0], "the server's one frame comes in 6 fragments")
                #expect(server.records.messages == 1 && server.records.messageBytes == edited.count)
                try await client.send(WebSocketWire.frame(opcode: 8, [0x03, 0xE8]))
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                let session = try #require(record.webSocket)
                #expect(session.sentMessages == 1 && session.sentBytes == edited.count, "\(session.sentMessages) \(session.sentBytes)")
                #expect(session.receivedMessages == 1 && session.receivedBytes == edited.count)
            }
        }
    }

    /// A big frame relayed in fragments and cut short: the server got part of the message, which the log left out (it
    /// listed messages at their last frame only).
    @Test("a session that ends inside a big frame: the log lists the message as far as it went on, truncated")
    func cutShortFrameIsLogged() async throws {
        let listener = try RawListener()
        defer { listener.close() }
        try await withProxy({ $0.captureBodies = true }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(30))
            defer { client.close() }
            try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(listener.port)/", host: "127.0.0.1:\(listener.port)"))
            let server = try await listener.accept(timeout: .seconds(30), readTimeout: .seconds(30))
            defer { server.close() }
            _ = try await UpgradeClientDrainTests.readHead(server)
            try await server.send(WebSocketAdversarialTests.accept)
            #expect(try await client.readResponse().status == 101)
            let key: [UInt8] = [9, 8, 7, 6]
            let sent = 3 * Self.fragment
            let payload = Self.masked(pattern(count: sent), key)
            // The header of a 10 MiB frame, and 3 MiB of it.
            try await client.send(Self.head(opcode: 2, length: 10 * Self.fragment, key: key) + payload)
            let follower = try await server.run { server in
                var follower = FrameFollower(expected: payload)
                while follower.matched < sent {
                    let bytes = try server.readSomeNow(upTo: 256 * 1024)
                    guard !bytes.isEmpty else { break }
                    follower.take(bytes)
                }
                return follower
            }
            #expect(follower.matched == sent && follower.mismatchAt == nil && follower.heads.count == 3)
            client.close()
            #expect(await server.waitForClose(), "the server's connection closes")
            let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
            let session = try #require(record.webSocket)
            #expect(session.sentMessages == 1 && session.sentBytes == sent, "\(session.sentMessages) \(session.sentBytes)")
            let message = try #require(session.messages.first)
            #expect(message.opcode == 2 && message.size == sent && message.truncated)
            #expect(message.data == Array(pattern(count: sent).prefix(message.data.count)) && !message.data.isEmpty)
        }
    }

    /// RFC 6455 §5.4: an intermediary must not change the fragmentation of a session whose extensions it does not
    /// know (they may give RSV bits or fragments a meaning).
    @Test("under an extension hookproxy does not know, a 3 MiB frame goes on whole; under permessage-deflate, in fragments",
          arguments: ["x-webkit-deflate-frame", "permessage-deflate"])
    func unknownExtensionKeepsFrames(extensions: String) async throws {
        let listener = try RawListener()
        defer { listener.close() }
        try await withProxy { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(30))
            defer { client.close() }
            try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(listener.port)/", host: "127.0.0.1:\(listener.port)",
                                                          extra: ["Sec-WebSocket-Extensions: \(extensions)"]))
            let server = try await listener.accept(timeout: .seconds(30), readTimeout: .seconds(30))
            defer { server.close() }
            _ = try await UpgradeClientDrainTests.readHead(server)
            try await server.send(String(WebSocketAdversarialTests.accept.dropLast()) + "Sec-WebSocket-Extensions: \(extensions)\r\n\r\n")
            #expect(try await client.readResponse().status == 101)
            let key: [UInt8] = [9, 8, 7, 6]
            let payload = Self.masked(pattern(count: 3 << 20), key)
            // RSV1 set: a compressed message's frame under permessage-deflate (the payload is not read as one here).
            var frame = Self.head(opcode: 2, length: payload.count, key: key) + payload
            frame[0] |= 0x40
            try await client.send(frame)
            let follower = try await Self.follow(server, expecting: payload)
            #expect(follower.matched == payload.count && follower.mismatchAt == nil)
            let firstBytes = follower.heads.map(\.first)
            if extensions == "permessage-deflate" {
                #expect(firstBytes == [0x42, 0x00, 0x80], "RSV1 on the first fragment only")
            } else {
                #expect(firstBytes == [0xC2], "one frame, as it came")
            }
        }
    }

    /// A frame's header: FIN set, `opcode`, masked with `key` when given.
    static func head(opcode: UInt8, length: Int, key: [UInt8]?) -> [UInt8] {
        WebSocketFrameHead.bytes(first: 0x80 | opcode, length: UInt64(length), key: key)
    }

    /// Reads from `peer` (one step, on its own thread) until every byte of `expected` came, or the peer closed,
    /// following the frames they come in.
    static func follow(_ peer: RawClient, expecting expected: [UInt8]) async throws -> FrameFollower {
        try await peer.run { peer in
            var follower = FrameFollower(expected: expected)
            while follower.matched < expected.count {
                let bytes = try peer.readSomeNow(upTo: 256 * 1024)
                guard !bytes.isEmpty else { break }
                follower.take(bytes)
            }
            return follower
        }
    }

    /// `pattern(count:)`, made by copying (a byte at a time takes seconds for 40 MiB in a debug build).
    static func bigPattern(count: Int) -> [UInt8] {
        var bytes = pattern(count: min(count, 251 * 4))
        bytes.reserveCapacity(count)
        // Each copy is a whole number of periods from the start, so the pattern goes on where it stopped.
        while bytes.count < count { bytes += bytes.prefix(count - bytes.count) }
        return bytes
    }

    /// `bytes` masked with `key`, a word at a time (a byte at a time takes seconds for 40 MiB in a debug build).
    static func masked(_ bytes: [UInt8], _ key: [UInt8]) -> [UInt8] {
        var out = bytes
        let word = key.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        out.withUnsafeMutableBytes { raw in
            let words = raw.count / 4
            for index in 0..<words {
                let offset = index * 4
                raw.storeBytes(of: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self) ^ word, toByteOffset: offset, as: UInt32.self)
            }
            for index in (words * 4)..<raw.count { raw[index] ^= key[index % 4] }
        }
        return out
    }
}

/// The largest of the values noted. Any thread.
final class Peak: Sendable {
    private let largest: Mutex<Int>
    init(_ start: Int) { largest = Mutex(start) }
    func note(_ value: Int) { largest.withLock { $0 = max($0, value) } }
    var value: Int { largest.withLock { $0 } }
}

/// Follows the frames a peer receives, as their bytes come: their headers, and their payload bytes, in order,
/// against `expected` (the payload the sender wrote, as it went on the wire). Pure.
struct FrameFollower: Sendable {
    struct Head: Sendable {
        var first: UInt8
        var length: Int
        var key: [UInt8]?
    }

    let expected: [UInt8]
    private(set) var heads: [Head] = []
    /// Payload bytes seen so far.
    private(set) var matched = 0
    /// Where the first payload byte that was not `expected`'s is.
    private(set) var mismatchAt: Int?
    private var header: [UInt8] = []
    private var payloadLeft = 0

    init(expected: [UInt8]) { self.expected = expected }

    mutating func take(_ bytes: [UInt8]) {
        var at = 0
        while at < bytes.count {
            if payloadLeft > 0 {
                let count = min(payloadLeft, bytes.count - at)
                if mismatchAt == nil, !Self.same(bytes[at..<at + count], expected, at: matched) { mismatchAt = matched }
                matched += count
                payloadLeft -= count
                at += count
                continue
            }
            header.append(bytes[at])
            at += 1
            guard header.count >= 2 else { continue }
            let code = header[1] & 0x7F
            let size = 2 + (code == 126 ? 2 : code == 127 ? 8 : 0) + (header[1] & 0x80 != 0 ? 4 : 0)
            guard header.count == size else { continue }
            let length = switch code {
            case 126: Int(header[2]) << 8 | Int(header[3])
            case 127: header[2..<10].reduce(0) { $0 << 8 | Int($1) }
            default: Int(code)
            }
            heads.append(Head(first: header[0], length: length, key: header[1] & 0x80 != 0 ? Array(header.suffix(4)) : nil))
            payloadLeft = length
            header.removeAll(keepingCapacity: true)
        }
    }

    /// Whether `piece` is `whole`'s bytes from `offset` on.
    private static func same(_ piece: ArraySlice<UInt8>, _ whole: [UInt8], at offset: Int) -> Bool {
        guard offset + piece.count <= whole.count else { return false }
        return piece.withUnsafeBytes { a in
            whole.withUnsafeBytes { b in memcmp(a.baseAddress!, b.baseAddress! + offset, piece.count) == 0 }
        }
    }
}
