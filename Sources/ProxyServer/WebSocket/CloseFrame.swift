import NIOCore
import NIOWebSocket

/// The close frames hookproxy writes itself (shutting down, failing a session). Pure.
enum CloseFrame {
    /// The most reason bytes a close frame holds: a control frame's 125, less the 2 of the code (RFC 6455 §5.5).
    static let maxReasonBytes = 123

    /// A close frame with `code` and `reason`, the reason cut to `maxReasonBytes` at a character's boundary (the
    /// receiver fails a connection whose close reason is not UTF-8). Unmasked: `WebSocketSession.forwardable` masks
    /// the copy for the server.
    static func make(code: UInt16, reason: String, allocator: ByteBufferAllocator) -> WebSocketFrame {
        let text = fitting(reason)
        var payload = allocator.buffer(capacity: 2 + text.utf8.count)
        payload.writeInteger(code)
        payload.writeSubstring(text)
        return WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)
    }

    /// `reason` as far as it fits, whole characters only.
    static func fitting(_ reason: String) -> Substring {
        guard reason.utf8.count > maxReasonBytes else { return Substring(reason) }
        var end = reason.startIndex
        var bytes = 0
        for index in reason.unicodeScalars.indices {
            let size = reason.unicodeScalars[index].utf8.count
            guard bytes + size <= maxReasonBytes else { break }
            bytes += size
            end = reason.unicodeScalars.index(after: index)
        }
        return reason[..<end]
    }
}
