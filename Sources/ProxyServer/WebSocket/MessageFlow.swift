import Foundation
import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules

/// One direction of a WebSocket session: puts data frames back together into messages (for the log, undoing
/// `permessage-deflate`), and, when a `websocket` rule edits this direction, holds a text message's frames until
/// its last one and sends the edited message as one frame. Under `permessage-deflate` it holds every compressed
/// message, inflates it, edits it if it is text, and compresses it again (`MessageDeflater`). Client connection's
/// loop; a value inside the session.
struct MessageFlow {
    /// A message whose last frame arrived.
    struct Complete {
        var direction: WebSocketLog.Direction
        var time: Date
        var opcode: Int
        /// Its size after inflating (the payload's size when it was not compressed).
        var size: Int
        /// Its bytes as far as they were kept.
        var data: ByteBuffer
        var truncated: Bool
    }

    /// What one frame gives: frames to forward now, the message it completed, and why the session cannot go on
    /// (a compressed message that hookproxy, compressing this direction itself, could not inflate).
    struct Taken {
        var forward: [WebSocketFrame]
        var message: Complete?
        var failure: String?
    }

    let direction: WebSocketLog.Direction
    let transform: (any BodyTransforming)?
    let inflater: MessageInflater?
    /// Set when `transform` edits this direction under `permessage-deflate`.
    let deflater: MessageDeflater?
    /// How much of an uncompressed message the log may keep.
    let keepLimit: Int
    /// A held message larger than this is let through unedited.
    static let maxEditedMessage = BodyTransformLimits.maxInputBytes

    private var opcode = WebSocketOpcode.text
    private var compressed = false
    /// The current message is compressed and goes out compressed by `deflater`.
    private var recompressing = false
    private var started = Date()
    private var payload = ByteBuffer()
    private var size = 0
    private var truncated = false
    private var held: [WebSocketFrame] = []
    private var holding = false
    /// Notes of the edits made (the session logs them as hook events).
    private(set) var notes = SessionNotes()

    init(direction: WebSocketLog.Direction, transform: (any BodyTransforming)?, inflater: MessageInflater?,
         deflater: MessageDeflater? = nil, keepLimit: Int) {
        self.direction = direction
        self.transform = transform
        self.inflater = inflater
        self.deflater = transform == nil ? nil : deflater
        self.keepLimit = keepLimit
    }

    private var side: String { direction == .send ? "to_server" : "to_client" }

    /// Takes a data frame (text, binary, continuation): what to forward now, and the message it completed.
    mutating func take(_ frame: WebSocketFrame) -> Taken {
        if frame.opcode != .continuation {
            opcode = frame.opcode
            compressed = frame.rsv1
            started = Date()
            payload.clear()
            size = 0
            truncated = false
            recompressing = compressed && deflater != nil
            holding = transform != nil && ((frame.opcode == .text && !compressed) || recompressing)
        }
        let data = frame.unmaskedData
        size += data.readableBytes
        let limit = compressed || holding ? MessageInflater.maxMessageBytes : keepLimit
        if payload.readableBytes < limit {
            var slice = data
            if slice.readableBytes > limit - payload.readableBytes {
                slice = slice.getSlice(at: slice.readerIndex, length: limit - payload.readableBytes)!
                truncated = true
            }
            payload.writeImmutableBuffer(slice)
        } else if data.readableBytes > 0 {
            truncated = true
        }
        var forward: [WebSocketFrame] = []
        if holding && recompressing {
            // Its bytes are in `payload` (it goes out as one new frame, so its frames are not kept). Once hookproxy
            // compresses a direction nothing else may, so a message past the limit cannot go on: the session ends
            // now, not at a last frame that may never come.
            if truncated {
                holding = false
                payload.clear()
                return Taken(forward: [], message: nil,
                             failure: "hookproxy: a compressed \(side) message over \(MessageInflater.maxMessageBytes) bytes cannot be edited")
            }
        } else if holding {
            held.append(frame)
            if size > MessageFlow.maxEditedMessage {
                holding = false
                notes.add("\(side) message over \(MessageFlow.maxEditedMessage) bytes: sent unchanged")
                forward = held
                held.removeAll()
            }
        } else {
            forward = [frame]
        }
        guard frame.fin else { return Taken(forward: forward, message: nil) }
        var inflated: ByteBuffer?
        if compressed {
            inflated = inflater?.inflate(payload)
            if inflated == nil { truncated = true }
        }
        var failure: String?
        if holding {
            holding = false
            held.removeAll()
            if !recompressing {
                payload = edited(payload)
                size = payload.readableBytes
                forward = [WebSocketFrame(fin: true, opcode: .text, data: payload)]
            } else if var plain = inflated {  // (a truncated message failed above, at its limit)
                if opcode == .text && plain.readableBytes <= MessageFlow.maxEditedMessage {
                    plain = edited(plain)
                    inflated = plain
                } else if opcode == .text {
                    notes.add("\(side) message over \(MessageFlow.maxEditedMessage) bytes: sent unchanged")
                }
                if let deflated = deflater?.deflate(plain) {
                    forward = [WebSocketFrame(fin: true, rsv1: true, opcode: opcode, data: deflated)]
                } else {
                    failure = "hookproxy: cannot compress a \(side) message again"
                }
            } else {
                failure = "hookproxy: cannot inflate a compressed \(side) message to edit it (corrupt, or over \(MessageInflater.maxMessageBytes) bytes inflated)"
            }
        }
        let logged = inflated ?? payload
        let message = Complete(direction: direction, time: started, opcode: Int(UInt8(webSocketOpcode: opcode)),
                               size: inflated?.readableBytes ?? size, data: logged, truncated: truncated)
        return Taken(forward: forward, message: message, failure: failure)
    }

    /// A held text message, edited by the rules.
    private mutating func edited(_ message: ByteBuffer) -> ByteBuffer {
        var headers = HeaderFields()
        let (bytes, notes) = transform!.apply(to: Array(message.readableBytesView), headers: &headers)
        for note in notes { self.notes.add("\(side) message: \(note)") }
        return ByteBuffer(bytes: bytes)
    }
}
