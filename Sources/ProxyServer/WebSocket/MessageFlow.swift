import FoundationEssentials
import Glibc
import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules

/// One direction of a WebSocket session: follows its data frames message by message (for the log, undoing
/// `permessage-deflate` as the frames come), and, when a `websocket` rule edits this direction, holds a text
/// message's frames until its last one and sends the edited message as one frame. Under `permessage-deflate` it
/// holds every compressed message inflated, edits it if it is text, and compresses it again (`MessageDeflater`).
/// Client connection's loop; a value inside the session.
///
/// Memory: what it keeps of a message for the log is at most the `room` the session gives it; only a message a rule
/// edits is held whole, within `maxEditedMessage` (uncompressed, and `maxHeldFrames` frames) or
/// `MessageInflater.maxMessageBytes` (inflated).
struct MessageFlow {
    /// A message whose last frame arrived.
    struct Complete {
        var direction: WebSocketLog.Direction
        var time: Date
        var opcode: Int
        /// Its size after inflating (the payload's size when it was not compressed or could not be inflated).
        var size: Int
        /// Its bytes as far as they were kept.
        var data: ByteBuffer
        var truncated: Bool
    }

    /// Why the session cannot go on.
    enum Failure: Equatable {
        /// Frames that break RFC 6455's message rules (a continuation with nothing to continue, a new message inside
        /// a fragmented one, a reserved opcode): what the message is cannot be told, so neither logged nor edited.
        case badFrame(String)
        /// A compressed message that hookproxy, compressing this direction itself, could not inflate or compress.
        case cannotEdit(String)
    }

    /// What one frame gives: frames to forward now, the message it completed, and why the session cannot go on.
    struct Taken {
        var forward: FrameBatch
        var message: Complete?
        var failure: Failure?
    }

    let direction: WebSocketLog.Direction
    let transform: (any BodyTransforming)?
    let inflater: MessageInflater?
    /// Set when `transform` edits this direction under `permessage-deflate`.
    let deflater: MessageDeflater?
    /// A held message larger than this is let through unedited.
    static let maxEditedMessage = BodyTransformLimits.maxInputBytes
    /// A held message in more frames than this is let through unedited (empty fragments cost nothing in bytes).
    static let maxHeldFrames = 16_384
    /// What a session keeps of its log buffer between messages; a larger one is let go.
    static let reusedKeepCapacity = 64 * 1024

    /// A message started and its last frame has not come.
    private var inMessage = false
    private var opcode = WebSocketOpcode.text
    private var compressed = false
    /// The current message is compressed and goes out compressed by `deflater`.
    private var recompressing = false
    private var started = Date()
    /// The payload bytes of the message so far (compressed ones as they came).
    private var size = 0
    /// Its bytes after inflating, and whether inflating failed.
    private var inflatedSize = 0
    private var inflateFailed = false
    /// How many of its (inflated) bytes the log keeps, and those kept.
    private var room = 0
    private var kept = ByteBuffer()
    private var truncated = false
    /// The frames of an uncompressed text message held for an edit, and their payload's size.
    private var held: [WebSocketFrame] = []
    private var heldBytes = 0
    private var holding = false
    /// The inflated message held for an edit and compressing again.
    private var plain = ByteBuffer()
    /// Notes of the edits made (the session logs them as hook events).
    private(set) var notes = SessionNotes()

    init(direction: WebSocketLog.Direction, transform: (any BodyTransforming)?, inflater: MessageInflater?,
         deflater: MessageDeflater? = nil) {
        self.direction = direction
        self.transform = transform
        self.inflater = inflater
        self.deflater = transform == nil ? nil : deflater
    }

    private var side: String { direction == .send ? "to_server" : "to_client" }

    /// Takes a data frame (text, binary, continuation, or a reserved opcode the decoder let through): what to forward
    /// now, and the message it completed. `room`: how many bytes of a message that starts here the log may keep.
    mutating func take(_ frame: WebSocketFrame, room: Int) -> Taken {
        if frame.opcode == .continuation {
            guard inMessage else { return Taken(forward: .none, message: nil, failure: .badFrame("a continuation frame with no message to continue")) }
        } else {
            guard frame.opcode == .text || frame.opcode == .binary else {
                return Taken(forward: .none, message: nil, failure: .badFrame("reserved opcode \(UInt8(webSocketOpcode: frame.opcode))"))
            }
            guard !inMessage else {
                return Taken(forward: .none, message: nil, failure: .badFrame("a new message inside a fragmented one"))
            }
            start(frame, room: room)
        }
        let data = frame.unmaskedData
        size += data.readableBytes
        var forward = FrameBatch.none
        if compressed {
            inflate(data, last: frame.fin)
            if recompressing && inflateFailed {
                // The receiver's window is hookproxy's: nothing after this message may go on. The session ends now,
                // not at a last frame that may never come; the message is logged as far as it went.
                inMessage = false
                let inflated = plain
                plain = ByteBuffer()
                return Taken(forward: .none, message: complete(data: inflated),
                             failure: .cannotEdit("hookproxy: cannot inflate a compressed \(side) message to edit it (corrupt, or over \(MessageInflater.maxMessageBytes) bytes inflated)"))
            }
        } else {
            keep(data)
        }
        if recompressing {
            // Its bytes are in `plain`: it goes out as one new frame, so its frames are not kept.
        } else if holding {
            held.append(frame)
            heldBytes += data.readableBytes
            if heldBytes > MessageFlow.maxEditedMessage || held.count > MessageFlow.maxHeldFrames {
                holding = false
                notes.add(heldBytes > MessageFlow.maxEditedMessage
                          ? "\(side) message over \(MessageFlow.maxEditedMessage) bytes: sent unchanged"
                          : "\(side) message in over \(MessageFlow.maxHeldFrames) frames: sent unchanged")
                forward = .many(held)
                held = []
            }
        } else {
            forward = .one(frame)
        }
        guard frame.fin else { return Taken(forward: forward, message: nil) }
        inMessage = false
        if holding {
            holding = false
            let message = edited(joined(held))
            held = []
            size = message.readableBytes
            truncated = false  // the log gets the whole edited message (the session keeps what it has room for)
            return Taken(forward: .one(WebSocketFrame(fin: true, opcode: .text, data: message)), message: complete(data: message))
        }
        if recompressing {
            var message = plain
            plain = ByteBuffer()
            if opcode == .text && message.readableBytes <= MessageFlow.maxEditedMessage {
                message = edited(message)
            } else if opcode == .text {
                notes.add("\(side) message over \(MessageFlow.maxEditedMessage) bytes: sent unchanged")
            }
            inflatedSize = message.readableBytes
            guard let deflated = deflater?.deflate(message) else {
                return Taken(forward: .none, message: complete(data: message),
                             failure: .cannotEdit("hookproxy: cannot compress a \(side) message again"))
            }
            return Taken(forward: .one(WebSocketFrame(fin: true, rsv1: true, opcode: opcode, data: deflated)),
                         message: complete(data: message))
        }
        return Taken(forward: forward, message: complete(data: kept))
    }

    /// The message the session ended inside (its last frame never came), as far as it went on: logged truncated,
    /// since the receiver got part of it. Nil when there is none, or when it was held for an edit (none of it went on).
    mutating func unfinished() -> Complete? {
        guard inMessage, !holding, !recompressing else { return nil }
        inMessage = false
        truncated = true
        return complete(data: kept)
    }

    private mutating func start(_ frame: WebSocketFrame, room: Int) {
        inMessage = true
        opcode = frame.opcode
        compressed = frame.rsv1
        started = Date()
        size = 0
        inflatedSize = 0
        // A compressed message with no agreement to undo it is logged as it came, marked truncated.
        inflateFailed = compressed && inflater == nil
        truncated = inflateFailed
        self.room = room
        // The last message's buffer is used again (the log has copied what it keeps), unless a large one grew it.
        if kept.capacity > MessageFlow.reusedKeepCapacity { kept = ByteBuffer() } else { kept.clear() }
        recompressing = compressed && deflater != nil
        holding = transform != nil && frame.opcode == .text && !compressed
        heldBytes = 0
    }

    /// Inflates the next piece of a compressed message: into `plain` when it goes out compressed again (whole, up
    /// to the inflater's limit), else only what the log keeps.
    private mutating func inflate(_ data: ByteBuffer, last: Bool) {
        guard let inflater else { return keep(data) }
        // Called for every piece, after a failure too: the inflater ends the message at its last piece.
        let ok = inflater.inflate(data, last: last) { piece in
            inflatedSize += piece.readableBytes
            if recompressing { plain.writeImmutableBuffer(piece) } else { keep(piece) }
        }
        if !ok {
            // The log's size is then the compressed one: said so, since sizes are otherwise as inflated.
            if !inflateFailed {
                notes.add("\(side) message not inflated (over \(MessageInflater.maxMessageBytes) bytes inflated, or not DEFLATE data): its size in the log is its compressed size")
            }
            inflateFailed = true
            truncated = true
        }
    }

    /// Keeps what the log may of the message's next bytes.
    private mutating func keep(_ bytes: ByteBuffer) {
        let wanted = min(bytes.readableBytes, room - kept.readableBytes)
        if wanted < bytes.readableBytes { truncated = true }
        if wanted > 0 { kept.writeImmutableBuffer(bytes.getSlice(at: bytes.readerIndex, length: wanted)!) }
    }

    /// The message that ended, as the log shows it: its size inflated when it could be.
    private func complete(data: ByteBuffer) -> Complete {
        let inflated = compressed && !inflateFailed
        return Complete(direction: direction, time: started, opcode: Int(UInt8(webSocketOpcode: opcode)),
                        size: inflated ? inflatedSize : size, data: data, truncated: truncated)
    }

    /// The payloads of `frames`, one after the other.
    private func joined(_ frames: [WebSocketFrame]) -> ByteBuffer {
        guard frames.count > 1 else { return frames.first?.unmaskedData ?? ByteBuffer() }
        var whole = ByteBufferAllocator().buffer(capacity: frames.reduce(0) { $0 + $1.data.readableBytes })
        for frame in frames { whole.writeImmutableBuffer(frame.unmaskedData) }
        return whole
    }

    /// A held text message, edited by the rules.
    private mutating func edited(_ message: ByteBuffer) -> ByteBuffer {
        var headers = HeaderFields()
        let (bytes, notes) = transform!.apply(to: Array(message.readableBytesView), headers: &headers)
        for note in notes { self.notes.add("\(side) message: \(note)") }
        return ByteBuffer(bytes: bytes)
    }
}
