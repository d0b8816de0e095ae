/// The bytes of a WebSocket frame's header as a peer writes it (RFC 6455 §5.2), for tests that hand-craft frames.
public enum WebSocketFrameHead {
    /// `first` is FIN, the RSV bits and the opcode; the length takes 7, 16 or 64 bits as it needs (`length`, which
    /// may declare more than follows); the masking key follows when given.
    public static func bytes(first: UInt8, length: UInt64, key: [UInt8]?) -> [UInt8] {
        let maskBit: UInt8 = key == nil ? 0 : 0x80
        var bytes: [UInt8] = [first]
        if length <= 125 {
            bytes.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            bytes += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            bytes += (0..<8).reversed().map { UInt8((length >> (UInt64($0) * 8)) & 0xFF) }
        }
        return bytes + (key ?? [])
    }
}
