import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import ProxyServer
import Testing

/// A frame toward a server leaves as NIO's encoder writes it unmasked from a payload masked 8 bytes at a time, with
/// the mask bit and key put into that header (`MaskedFrame`): byte for byte what the encoder writes when it masks the
/// frame itself, for every length class and header layout, and what NIO's decoder reads back as the frame.
struct MaskedFrameTests {
    /// All the bytes `frame` encodes to through NIO's `WebSocketFrameEncoder`, with `adjust` applied to the first
    /// buffer written.
    static func encoded(_ frame: WebSocketFrame, adjustingFirst adjust: (ByteBuffer) -> ByteBuffer = { $0 }) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        defer { _ = try? channel.finish() }
        try channel.writeOutbound(frame)
        var bytes: [UInt8] = []
        var first = true
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            let written = first ? adjust(buffer) : buffer
            first = false
            bytes += written.readableBytesView
        }
        return bytes
    }

    /// The bytes hookproxy sends for `frame` masked with `key`.
    static func relayed(_ frame: WebSocketFrame, key: WebSocketMaskingKey) throws -> [UInt8] {
        let premasked = try #require(MaskedFrame.premasked(frame, key: key))
        #expect(premasked.maskKey == nil)
        return try encoded(premasked) { MaskedFrame.addingKey(key, to: $0) }
    }

    @Test func theBytesAreTheEncodersOwnMaskedFrameAtEveryLengthClass() throws {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 8, 9, 125, 126, 127, 1024, 65_535, 65_536, 70_001] {
            for (opcode, fin, rsv1) in [(WebSocketOpcode.binary, true, false), (.text, false, true), (.continuation, true, false),
                                        (.ping, true, false), (.connectionClose, true, false)] where opcode == .binary || length <= 125 {
                let key = WebSocketMaskingKey.random(using: &generator)
                let payload = ByteBuffer(bytes: (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
                let plain = WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, data: payload)
                var masked = plain
                masked.maskKey = key
                let expected = try Self.encoded(masked)
                #expect(try Self.relayed(plain, key: key) == expected, "length \(length), \(opcode)")
            }
        }
    }

    @Test func nIOsDecoderReadsTheFrameBack() throws {
        let key = try #require(WebSocketMaskingKey([0xa1, 0x02, 0xf3, 0x44]))
        let text = String(repeating: "a message toward the server ", count: 10)
        let plain = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text))
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder()))
        defer { _ = try? channel.finish() }
        try channel.writeInbound(ByteBuffer(bytes: try Self.relayed(plain, key: key)))
        let frame = try #require(try channel.readInbound(as: WebSocketFrame.self))
        #expect(frame.maskKey == key && frame.fin && frame.opcode == .text)
        #expect(String(buffer: frame.unmaskedData) == text)
    }

    @Test func aFrameWithExtensionDataIsLeftToTheEncoder() throws {
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        let frame = WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(string: "data"),
                                   extensionData: ByteBuffer(string: "ext"))
        #expect(MaskedFrame.premasked(frame, key: key) == nil)
    }
}
