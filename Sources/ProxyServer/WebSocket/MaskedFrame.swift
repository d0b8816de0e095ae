import NIOCore
import NIOWebSocket

/// Frames toward a server, masked 8 bytes at a time. NIO's `WebSocketFrameEncoder` masks a payload one byte at a
/// time, which was a quarter of a relayed round trip's instructions (callgrind, bench/README.md "Session 16"). The
/// encoder still writes each frame: unmasked, from a payload masked here (`premasked`); the header it wrote then
/// gets the mask bit and the key after its length (`addingKey`, RFC 6455 §5.2). The result is the bytes the encoder
/// writes for the masked frame, which `MaskedFrameTests` checks byte for byte against it.
enum MaskedFrame {
    /// `frame` as the encoder is given it: its payload masked with `key`, and no key. Nil for a frame with extension
    /// data (NIO's decoder makes none), which the encoder masks itself.
    static func premasked(_ frame: WebSocketFrame, key: WebSocketMaskingKey) -> WebSocketFrame? {
        guard frame.extensionData == nil else { return nil }
        return WebSocketFrame(fin: frame.fin, rsv1: frame.rsv1, rsv2: frame.rsv2, rsv3: frame.rsv3, opcode: frame.opcode,
                              maskKey: nil, data: frame.data.unmaskedCopy(key))  // XOR both ways: this masks
    }

    /// The encoder's first buffer for a premasked frame (it starts with the frame's header, alone or before the
    /// payload) with the mask bit set and `key` after the header's length.
    static func addingKey(_ key: WebSocketMaskingKey, to first: ByteBuffer) -> ByteBuffer {
        let start = first.readerIndex
        guard first.readableBytes >= 2, let lengthByte = first.getInteger(at: start + 1, as: UInt8.self) else { return first }
        let headerSize = 2 + (lengthByte == 127 ? 8 : lengthByte == 126 ? 2 : 0)
        var masked = ByteBufferAllocator().buffer(capacity: first.readableBytes + 4)
        masked.writeImmutableBuffer(first.getSlice(at: start, length: 1)!)
        masked.writeInteger(lengthByte | 0x80)
        masked.writeImmutableBuffer(first.getSlice(at: start + 2, length: headerSize - 2)!)
        masked.writeBytes(key)
        masked.writeImmutableBuffer(first.getSlice(at: start + headerSize, length: first.readableBytes - headerSize)!)
        return masked
    }
}
