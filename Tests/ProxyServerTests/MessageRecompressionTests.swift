import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules
import Testing
@testable import ProxyServer

/// What a hostile review found in re-compressing edited permessage-deflate messages (`MessageFlow`,
/// `MessageDeflater`), each pinned down.
struct MessageRecompressionTests {
    /// Upper-cases text messages.
    struct Shout: BodyTransforming {
        func apply(to body: [UInt8], headers: inout HeaderFields) -> (body: [UInt8], notes: [String]) {
            (Array(String(decoding: body, as: UTF8.self).uppercased().utf8), [])
        }
        var ruleNames: [String] { ["shout"] }
    }

    static func flow() -> MessageFlow {
        MessageFlow(direction: .send, transform: Shout(),
                    inflater: MessageInflater(windowBits: 15, noContextTakeover: false),
                    deflater: MessageDeflater(windowBits: 15, noContextTakeover: false))
    }

    @Test("an empty message after another (context takeover) goes out as the single byte 0x00, and the stream stays whole")
    func emptyMessage() throws {
        let sender = try #require(MessageDeflater(windowBits: 15, noContextTakeover: false))
        let receiver = MessageInflater(windowBits: 15, noContextTakeover: false)
        var out: [String] = []
        for text in ["hello", "", "hello again", ""] {
            let compressed = try #require(sender.deflate(ByteBuffer(string: text)), "\(text.isEmpty ? "empty" : text)")
            if text.isEmpty { #expect(Array(compressed.readableBytesView) == [0x00]) }
            out.append(String(buffer: try #require(receiver.inflate(compressed))))
        }
        #expect(out == ["hello", "", "hello again", ""])
    }

    @Test("an edited compressed message edited to nothing is not an error")
    func editedToEmpty() throws {
        var flow = Self.flow()
        let source = try #require(MessageDeflater(windowBits: 15, noContextTakeover: false))
        for text in ["first", ""] {
            let frame = WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: try #require(source.deflate(ByteBuffer(string: text))))
            let taken = flow.take(frame, room: 1 << 20)
            #expect(taken.failure == nil, "\(String(describing: taken.failure))")
            #expect(taken.forward.count == 1 && taken.forward.first?.rsv1 == true)
        }
    }

    @Test("a compressed message that never ends stops at the inflater's limit with a failure; its frames are not kept")
    func endlessCompressedMessage() throws {
        var flow = Self.flow()
        // 1 MiB of one letter compresses to about 1 KiB: the limit is reached inflated, long before it is on the wire.
        let source = try #require(MessageDeflater(windowBits: 15, noContextTakeover: false))
        var chunk = try #require(source.deflate(ByteBuffer(repeating: 0x41, count: 1 << 20)))
        chunk.writeBytes([0x00, 0x00, 0xFF, 0xFF])  // a sync flush's end, so that pieces follow each other
        var taken = flow.take(WebSocketFrame(fin: false, rsv1: true, opcode: .text, data: chunk), room: 1 << 20)
        var frames = 1
        while taken.failure == nil && frames < 80 {
            #expect(taken.forward.isEmpty)
            taken = flow.take(WebSocketFrame(fin: false, opcode: .continuation, data: chunk), room: 0)
            frames += 1
        }
        guard case .cannotEdit(let reason)? = taken.failure else {
            Issue.record("after \(frames) MiB: \(String(describing: taken.failure))")
            return
        }
        #expect(reason.contains("cannot inflate"), "\(reason)")
        #expect(frames == MessageInflater.maxMessageBytes / (1 << 20) + 1)
        #expect(taken.message?.truncated == true, "the message is logged as far as it went")
    }
}
