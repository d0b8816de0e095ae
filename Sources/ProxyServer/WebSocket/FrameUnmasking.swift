import NIOCore
import NIOWebSocket

extension WebSocketFrame {
    /// The frame with its payload unmasked and no masking key. One pass that copies and unmasks 8 bytes at a time:
    /// NIO's `unmaskedData` goes byte by byte, and a relayed client message is unmasked once here, not at every use.
    var unmaskedFrame: WebSocketFrame {
        guard let key = maskKey else { return self }
        let plain = extensionData == nil ? data.unmaskedCopy(key) : unmaskedData  // (NIO's decoder sets none)
        return WebSocketFrame(fin: fin, rsv1: rsv1, rsv2: rsv2, rsv3: rsv3, opcode: opcode, maskKey: nil,
                              data: plain, extensionData: unmaskedExtensionData)
    }
}

extension ByteBuffer {
    /// A copy of the readable bytes with `key` undone (XOR is its own inverse: this masks as well), the key's first
    /// byte at the first readable byte.
    func unmaskedCopy(_ key: WebSocketMaskingKey) -> ByteBuffer {
        let count = readableBytes
        let start = key.startIndex
        let keyBytes = (key[start], key[start + 1], key[start + 2], key[start + 3])
        // The key repeated over 8 bytes, read as a word the way the payload's words are read (any byte order); no
        // allocation per frame.
        var repeated = (keyBytes.0, keyBytes.1, keyBytes.2, keyBytes.3, keyBytes.0, keyBytes.1, keyBytes.2, keyBytes.3)
        let keyWord = withUnsafeBytes(of: &repeated) { $0.loadUnaligned(as: UInt64.self) }
        var copy = ByteBufferAllocator().buffer(capacity: count)
        withUnsafeReadableBytes { source in
            copy.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { target in
                var index = 0
                while index + 8 <= count {
                    let word = source.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                    target.storeBytes(of: word ^ keyWord, toByteOffset: index, as: UInt64.self)
                    index += 8
                }
                withUnsafeBytes(of: &repeated) { key in
                    while index < count {
                        target[index] = source[index] ^ key[index & 3]
                        index += 1
                    }
                }
                return count
            }
        }
        return copy
    }
}
