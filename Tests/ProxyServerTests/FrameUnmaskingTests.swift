import NIOCore
import NIOWebSocket
@testable import ProxyServer
import Testing

/// hookproxy unmasks a relayed client frame once, 8 bytes at a time (`unmaskedFrame`): byte for byte what NIO's own
/// `unmaskedData` gives, at every length around the word size and from any reader index.
struct FrameUnmaskingTests {
    @Test func theWordwiseCopyEqualsNIOsUnmaskingAtEveryLengthAndOffset() throws {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...40) + [1023, 1024, 1025, 65_537] {
            for readerOffset in [0, 1, 3, 5] {
                let key = WebSocketMaskingKey.random(using: &generator)
                var buffer = ByteBuffer(bytes: (0..<(readerOffset + length)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                buffer.moveReaderIndex(forwardBy: readerOffset)
                var expected = buffer
                expected.webSocketUnmask(key)
                #expect(buffer.unmaskedCopy(key) == expected, "length \(length), reader offset \(readerOffset)")
            }
        }
    }

    @Test func anUnmaskedFrameKeepsItsFlagsAndLosesItsKey() throws {
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        var payload = ByteBuffer(string: "hello, server: a text message longer than one word")
        payload.webSocketMask(key)
        let frame = WebSocketFrame(fin: false, rsv1: true, opcode: .text, maskKey: key, data: payload)
        let plain = frame.unmaskedFrame
        #expect(plain.maskKey == nil)
        #expect(plain.fin == false && plain.rsv1 && plain.opcode == .text)
        #expect(String(buffer: plain.data) == "hello, server: a text message longer than one word")
        #expect(plain.unmaskedData == frame.unmaskedData)
        // Masked again with the client's key (as it is relayed), it is the client's bytes.
        #expect(WebSocketSession.forwardable(plain, towardServer: true, key: key).maskKey == key)
    }
}
