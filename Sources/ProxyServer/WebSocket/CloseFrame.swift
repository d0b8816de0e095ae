import NIOCore
import NIOWebSocket

/// The close frames hookproxy writes itself (shutting down, failing a session), and the rules a relayed one's payload
/// must keep. Pure.
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

    /// Why a close frame's (unmasked) payload breaks RFC 6455, with the close code to fail the session with; nil when
    /// it keeps the rules. A payload is empty, or a code (§5.5.1) that an endpoint may send (§7.4: 1000–1003,
    /// 1007–1014, 3000–4999; 1004, 1005, 1006 and 1015 are never sent, the rest below 3000 is unassigned) followed by
    /// a UTF-8 reason (§5.5.1; a reason that is not UTF-8 is 1007, RFC 6455 §8.1).
    static func violation(_ payload: ByteBuffer) -> (code: UInt16, what: String)? {
        guard payload.readableBytes > 0 else { return nil }
        guard let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self) else {
            return (1002, "a close frame with a 1-byte payload (a close code takes 2, RFC 6455 §5.5.1)")
        }
        guard isSendable(code) else {
            return (1002, "a close frame with code \(code), which no endpoint sends (RFC 6455 §7.4)")
        }
        let reason = payload.readableBytesView.dropFirst(2)
        guard String(validating: reason, as: UTF8.self) != nil else {
            return (1007, "a close frame whose reason is not UTF-8 (RFC 6455 §5.5.1)")
        }
        return nil
    }

    /// Whether an endpoint may send `code` in a close frame (RFC 6455 §7.4, and the IANA registry's 1012–1014).
    static func isSendable(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}
