import NIOCore

/// A body kept whole for a transform or a replay, up to a byte limit. Appending is amortised O(1): the chunks are
/// held in this value alone (never bound out of an enum payload, which copied the whole array for every part and
/// made a 1-byte-chunked upload quadratic on the event loop).
/// A value type; its owner is event-loop bound.
struct BufferedBody {
    private(set) var chunks: [ByteBuffer] = []
    private(set) var byteCount = 0
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Whether the bytes kept so far exceed the limit (then the body must stream unchanged instead).
    var isOverLimit: Bool { byteCount > limit }

    /// Keeps `buffer`; returns false once the kept bytes exceed the limit.
    @discardableResult
    mutating func append(_ buffer: ByteBuffer) -> Bool {
        chunks.append(buffer)
        byteCount += buffer.readableBytes
        return !isOverLimit
    }

    /// Every kept byte in one array, for a transform (off the event loop).
    func joined() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount)
        for chunk in chunks { bytes.append(contentsOf: chunk.readableBytesView) }
        return bytes
    }
}
