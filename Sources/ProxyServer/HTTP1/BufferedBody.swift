import NIOCore
import NIOPosix
import ProxyModel
import ProxyRules

/// A body kept whole for a transform or a replay, up to a byte limit (past it, the body streams unchanged). Appending is amortised O(1): the chunks are
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

/// A body after a transform, with the headers that describe it.
struct TransformedBody: Sendable {
    var bytes: ByteBuffer
    var headers: HeaderFields
    /// What the transform did, for the log (`hook: body` events).
    var notes: [String]
}

extension BufferedBody {
    /// Runs `transform` over the whole body on `pool`, never on the event loop; the future completes on
    /// `eventLoop`. The result is framed by its Content-Length (a transformed body is whole, so any
    /// Transfer-Encoding goes) — the one framing rule for both directions.
    func transformed(by transform: any BodyTransforming, headers: HeaderFields, pool: NIOThreadPool,
                     eventLoop: any EventLoop) -> EventLoopFuture<TransformedBody> {
        let kept = self  // joined on the pool too: copying a large body is work the loop should not do
        return pool.runIfActive(eventLoop: eventLoop) {
            var headers = headers
            let (body, notes) = transform.apply(to: kept.joined(), headers: &headers)
            headers.remove("Transfer-Encoding")
            headers.set("Content-Length", String(body.count))
            return TransformedBody(bytes: ByteBuffer(bytes: body), headers: headers, notes: notes)
        }
    }
}
