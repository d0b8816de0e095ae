import NIOWebSocket

/// The frames that one frame received gives to forward: most often that frame alone, which then needs no array (an
/// array per frame was a heap allocation and its release, twice per message relayed). Several when a held message
/// is let go; none while one is held, or after a close frame. Pure.
enum FrameBatch: RandomAccessCollection {
    case none
    case one(WebSocketFrame)
    case many([WebSocketFrame])

    var startIndex: Int { 0 }

    var endIndex: Int {
        switch self {
        case .none: 0
        case .one: 1
        case .many(let frames): frames.count
        }
    }

    subscript(position: Int) -> WebSocketFrame {
        switch self {
        case .none:
            preconditionFailure("FrameBatch.none holds no frame")
        case .one(let frame):
            precondition(position == 0, "FrameBatch.one holds one frame")
            return frame
        case .many(let frames):
            return frames[position]
        }
    }

    /// The same batch with each frame replaced by `transform`'s.
    func mapFrames(_ transform: (WebSocketFrame) -> WebSocketFrame) -> FrameBatch {
        switch self {
        case .none: .none
        case .one(let frame): .one(transform(frame))
        case .many(let frames): .many(frames.map(transform))
        }
    }
}
