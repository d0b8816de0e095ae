import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules
import Testing
@testable import ProxyServer

/// `MessageFlow` and `MessageInflater` against peers that break the rules or stretch them: what a hostile review of
/// WebSocket messages found, each pinned down.
struct MessageFlowTests {
    /// A raw DEFLATE stream of `text` as one stored block with BFINAL set: a whole stream, as a sender that flushes
    /// with BFINAL (RFC 7692 §7.2.3.4) writes a message.
    static func finalBlock(_ text: String) -> ByteBuffer {
        let bytes = Array(text.utf8)
        let length = UInt16(bytes.count)
        return ByteBuffer(bytes: [0x01, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)] + bytes)
    }

    static func logOnly() -> MessageFlow {
        MessageFlow(direction: .receive, transform: nil, inflater: MessageInflater(windowBits: 15, noContextTakeover: false))
    }

    @Test("messages that end their DEFLATE stream (BFINAL) inflate, and so do the messages after them, whole or in pieces")
    func finalBlocks() throws {
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        let later = try #require(MessageDeflater(windowBits: 15, noContextTakeover: false)).deflate(ByteBuffer(string: "three after"))
        let messages = [Self.finalBlock("one"), Self.finalBlock("two"), try #require(later)]
        #expect(messages.map { inflater.inflate($0).map { String(buffer: $0) } } == ["one", "two", "three after"])
        // The stream's end inside a message's first frame, the rest in a second one.
        var pieces = Self.finalBlock("four")
        let first = pieces.readSlice(length: 6)!
        var out = ByteBuffer()
        #expect(inflater.inflate(first, last: false) { out.writeImmutableBuffer($0) })
        #expect(inflater.inflate(pieces, last: true) { out.writeImmutableBuffer($0) })
        #expect(String(buffer: out) == "four")
    }

    /// 1 MiB of `a` compressed (about 1 KiB) and ended by a sync flush's `00 00 FF FF`, so that pieces of it can
    /// follow one another as the frames of one message.
    static func flushedMebibyte() throws -> ByteBuffer {
        let source = try #require(MessageDeflater(windowBits: 15, noContextTakeover: false))
        var piece = try #require(source.deflate(ByteBuffer(repeating: 0x61, count: 1 << 20)))
        piece.writeBytes([0x00, 0x00, 0xFF, 0xFF])
        return piece
    }

    @Test("a compressed message is inflated frame by frame: its size is complete, the log keeps only its room")
    func keepsOnlyTheRoom() throws {
        var flow = Self.logOnly()
        let piece = try Self.flushedMebibyte()
        var taken = flow.take(WebSocketFrame(fin: false, rsv1: true, opcode: .text, data: piece), room: 1000)
        for _ in 0..<6 { taken = flow.take(WebSocketFrame(fin: false, opcode: .continuation, data: piece), room: 0) }
        taken = flow.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer()), room: 0)
        let message = try #require(taken.message)
        #expect(message.size == 7 << 20)
        #expect(message.data.readableBytes == 1000 && message.truncated)
        #expect(message.data.readableBytesView.allSatisfy { $0 == 0x61 })
        #expect(taken.forward.count == 1, "frames pass as they come")
    }

    /// A review's find: past the inflater's limit a message's logged size fell back to its compressed size with no
    /// word of it, where every other size is as inflated (a 70 MiB message logged as 142 KB).
    @Test("a message over the inflater's limit is logged at its compressed size, with a note that says so")
    func overTheLimitIsNoted() throws {
        var flow = Self.logOnly()
        let piece = try Self.flushedMebibyte()
        let pieces = MessageInflater.maxMessageBytes / (1 << 20) + 2
        var taken = flow.take(WebSocketFrame(fin: false, rsv1: true, opcode: .binary, data: piece), room: 1000)
        for _ in 1..<pieces { taken = flow.take(WebSocketFrame(fin: false, opcode: .continuation, data: piece), room: 0) }
        taken = flow.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer()), room: 0)
        let message = try #require(taken.message)
        #expect(taken.failure == nil, "no rule edits it: the session goes on")
        #expect(message.size == pieces * piece.readableBytes && message.truncated)
        #expect(flow.notes.lines.contains { $0.contains("not inflated") && $0.contains("compressed size") }, "\(flow.notes.lines)")
        // A message within the limit has no such note.
        var small = Self.logOnly()
        _ = small.take(WebSocketFrame(fin: true, rsv1: true, opcode: .binary, data: piece), room: 1000)
        #expect(small.notes.lines.isEmpty)
    }

    @Test("a continuation with nothing to continue, a message inside a fragmented one, a reserved opcode: bad frames")
    func breaches() {
        var flow = Self.logOnly()
        #expect(flow.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(string: "x")), room: 100).failure
                == .badFrame("a continuation frame with no message to continue"))
        #expect(flow.take(WebSocketFrame(fin: false, opcode: .text, data: ByteBuffer(string: "a")), room: 100).failure == nil)
        #expect(flow.take(WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(string: "b")), room: 100).failure
                == .badFrame("a new message inside a fragmented one"))
        var fresh = Self.logOnly()
        #expect(fresh.take(WebSocketFrame(fin: true, opcode: WebSocketOpcode(encodedWebSocketOpcode: 3)!, data: ByteBuffer()), room: 100).failure
                == .badFrame("reserved opcode 3"))
        // A finished message, then a continuation: nothing is added to the message before.
        var done = Self.logOnly()
        #expect(done.take(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "whole")), room: 100).message?.size == 5)
        #expect(done.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(string: "more")), room: 100).message == nil)
    }

    /// Uppercases text messages.
    struct Shout: BodyTransforming {
        func apply(to body: [UInt8], headers: inout HeaderFields) -> (body: [UInt8], notes: [String]) {
            (Array(String(decoding: body, as: UTF8.self).uppercased().utf8), [])
        }
        var ruleNames: [String] { ["shout"] }
    }

    @Test("a text message held for an edit in more frames than the limit (empty ones cost no bytes) goes on unchanged")
    func tooManyFragments() {
        var flow = MessageFlow(direction: .send, transform: Shout(), inflater: nil)
        var forwarded = flow.take(WebSocketFrame(fin: false, opcode: .text, data: ByteBuffer(string: "start")), room: 100).forward.count
        for _ in 0..<MessageFlow.maxHeldFrames + 100 {
            forwarded += flow.take(WebSocketFrame(fin: false, opcode: .continuation, data: ByteBuffer()), room: 100).forward.count
        }
        let last = flow.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(string: "end")), room: 100)
        forwarded += last.forward.count
        #expect(forwarded == MessageFlow.maxHeldFrames + 102, "every frame goes on as it came")
        #expect(last.message.map { String(buffer: $0.data) } == "startend")
        #expect(flow.notes.lines == ["to_server message in over \(MessageFlow.maxHeldFrames) frames: sent unchanged"])
        // The next message is edited again.
        let next = flow.take(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "edit me")), room: 100)
        #expect(next.forward.map { String(buffer: $0.data) } == ["EDIT ME"])
    }

    @Test("a message the session ends inside is logged as far as it went on, truncated; one held for an edit is not (none of it went on)")
    func unfinishedMessages() throws {
        var relayed = Self.logOnly()
        _ = relayed.take(WebSocketFrame(fin: false, opcode: .binary, data: ByteBuffer(string: "went on")), room: 4)
        _ = relayed.take(WebSocketFrame(fin: false, opcode: .continuation, data: ByteBuffer(string: " too")), room: 0)
        let unfinished = relayed.unfinished()
        let message = try #require(unfinished)
        #expect(message.size == 11 && message.truncated && String(buffer: message.data) == "went" && message.opcode == 2)
        let again = relayed.unfinished()
        #expect(again == nil, "logged once")
        var held = MessageFlow(direction: .send, transform: Shout(), inflater: nil)
        #expect(held.take(WebSocketFrame(fin: false, opcode: .text, data: ByteBuffer(string: "held")), room: 100).forward.isEmpty)
        let heldMessage = held.unfinished()
        #expect(heldMessage == nil)
        var done = Self.logOnly()
        _ = done.take(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "whole")), room: 100)
        let after = done.unfinished()
        #expect(after == nil)
    }
}
