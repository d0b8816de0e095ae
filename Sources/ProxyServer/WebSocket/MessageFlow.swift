import Foundation
import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules

/// One direction of a WebSocket session: puts data frames back together into messages (for the log, undoing
/// `permessage-deflate`), and, when a `websocket` rule edits this direction, holds a text message's frames until
/// its last one and sends the edited message as one frame. Client connection's loop; a value inside the session.
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

    let direction: WebSocketLog.Direction
    let transform: (any BodyTransforming)?
    let inflater: MessageInflater?
    /// How much of an uncompressed message the log may keep.
    let keepLimit: Int
    /// A held message larger than this is let through unedited.
    static let maxEditedMessage = BodyTransformLimits.maxInputBytes

    private var opcode = 0
    private var compressed = false
    private var started = Date()
    private var payload = ByteBuffer()
    private var size = 0
    private var truncated = false
    private var held: [WebSocketFrame] = []
    private var holding = false
    /// Notes of the edits made (the session logs them as hook events).
    private(set) var notes: [String] = []

    init(direction: WebSocketLog.Direction, transform: (any BodyTransforming)?, inflater: MessageInflater?, keepLimit: Int) {
        self.direction = direction
        self.transform = transform
        self.inflater = inflater
        self.keepLimit = keepLimit
    }

    /// Takes a data frame (text, binary, continuation): what to forward now, and the message it completed.
    mutating func take(_ frame: WebSocketFrame) -> (forward: [WebSocketFrame], message: Complete?) {
        if frame.opcode != .continuation {
            opcode = Int(UInt8(webSocketOpcode: frame.opcode))
            compressed = frame.rsv1
            started = Date()
            payload.clear()
            size = 0
            truncated = false
            holding = transform != nil && frame.opcode == .text && !compressed
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
        if holding {
            held.append(frame)
            if size > MessageFlow.maxEditedMessage {
                holding = false
                notes.append("\(direction == .send ? "to_server" : "to_client") message over \(MessageFlow.maxEditedMessage) bytes: sent unchanged")
                forward = held
                held.removeAll()
            }
        } else {
            forward = [frame]
        }
        guard frame.fin else { return (forward, nil) }
        if holding {
            holding = false
            held.removeAll()
            forward = [edited()]
        }
        var logged = payload
        var loggedSize = size
        if compressed {
            if let inflated = inflater?.inflate(payload) {
                logged = inflated
                loggedSize = inflated.readableBytes
            } else {
                truncated = true
            }
        }
        return (forward, Complete(direction: direction, time: started, opcode: opcode, size: loggedSize,
                                  data: logged, truncated: truncated))
    }

    /// The held text message, edited by the rules, as one final frame.
    private mutating func edited() -> WebSocketFrame {
        var headers = HeaderFields()
        let (bytes, notes) = transform!.apply(to: Array(payload.readableBytesView), headers: &headers)
        let side = direction == .send ? "to_server" : "to_client"
        self.notes += notes.map { "\(side) message: \($0)" }
        payload = ByteBuffer(bytes: bytes)
        size = bytes.count
        return WebSocketFrame(fin: true, opcode: .text, data: payload)
    }
}
