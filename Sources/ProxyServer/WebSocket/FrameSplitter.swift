import NIOCore
import ProxyModel

/// Cuts the big data frames of one direction of a WebSocket session into fragments as their bytes arrive, in front
/// of NIO's `WebSocketFrameDecoder` (which holds a frame whole until its last byte): so the decoder holds at most
/// `maxFragment` payload bytes of a frame, not up to `maxFrameSize`. RFC 6455 §5.4 lets an intermediary change a
/// message's fragmentation, unless an extension it does not know was agreed (`allowed(extensions:)`).
///
/// A data frame (text, binary, continuation, or a reserved data opcode, which ends the session at its first
/// fragment) whose payload is over `maxFragment` goes on as fragments of at most that size: the first keeps the
/// opcode and RSV1 (`permessage-deflate` sets it on a message's first frame only, RFC 7692 §6.1) with FIN clear; the
/// next are continuations with the RSV bits clear; the last carries the frame's FIN. A masked frame's fragments keep
/// its masking key, and since `maxFragment` is a multiple of 4, their payload bytes are the frame's, as they came.
/// Everything else passes byte for byte (in the reads it came in, a header cut by the end of a read held until its
/// rest comes): control frames, frames up to `maxFragment`, frames with RSV bits no agreed extension defines, and a
/// frame over `maxFrameSize`, which the decoder then refuses at its header.
///
/// A value inside `FrameSplittingHandler`: the client connection's event loop.
struct FrameSplitter {
    /// The largest fragment payload: a multiple of 4 (masking keys repeat every 4 bytes).
    static let defaultMaxFragment = 1024 * 1024

    let maxFragment: Int
    let maxFrameSize: Int
    /// `permessage-deflate` was agreed: RSV1 marks a compressed message.
    let knowsRSV1: Bool

    private enum State {
        /// At a frame's header (in `head`, if a read ended inside it).
        case header
        /// A frame passing as it came: this many of its payload bytes have not come yet.
        case passing(remaining: Int)
        /// A frame being cut.
        case cutting(Cut)
    }

    private struct Cut {
        /// The frame's first byte: FIN, RSV bits, opcode.
        var firstByte: UInt8
        var maskKey: UInt32?
        /// Its payload bytes not handed on yet.
        var remaining: Int
        /// Those of the current fragment.
        var fragmentLeft = 0
        var started = false
    }

    private var state = State.header
    /// The bytes of a header a read ended in.
    private var head = ByteBuffer()

    init(maxFragment: Int = FrameSplitter.defaultMaxFragment, maxFrameSize: Int, knowsRSV1: Bool) {
        precondition(maxFragment > 0 && maxFragment % 4 == 0, "fragments of a masked frame must start at a key boundary")
        self.maxFragment = maxFragment
        self.maxFrameSize = maxFrameSize
        self.knowsRSV1 = knowsRSV1
    }

    /// Whether a session whose 101 agreed `extensions` (its `Sec-WebSocket-Extensions` values) may be re-fragmented:
    /// with none, or only `permessage-deflate` (RFC 7692 §6.1). Another extension may give fragments a meaning.
    static func allowed(extensions: [String]) -> Bool {
        extensions.flatMap { $0.split(separator: ",") }.allSatisfy { offer in
            let name = offer.split(separator: ";", omittingEmptySubsequences: false).first?.trimmingSpaces().lowercased()
            return name == "permessage-deflate" || name == ""
        }
    }

    /// The next bytes for the decoder, taken from `input`; nil once all of it was handed on (or kept: the start of a
    /// header). In order: runs of bytes that pass as they came, a fragment's header, a fragment's payload bytes.
    mutating func next(from input: inout ByteBuffer) -> ByteBuffer? {
        while true {
            switch state {
            case .cutting(var cut):
                if cut.fragmentLeft == 0 {
                    guard cut.remaining > 0 else {
                        state = .header
                        continue
                    }
                    let header = fragmentHeader(&cut)
                    state = .cutting(cut)
                    return header
                }
                guard input.readableBytes > 0 else { return nil }
                let count = min(cut.fragmentLeft, input.readableBytes)
                cut.fragmentLeft -= count
                cut.remaining -= count
                state = .cutting(cut)
                return input.readSlice(length: count)
            case .header where head.readableBytes > 0:
                guard let frame = completeHead(from: &input) else { return nil }
                if let cut = cutting(frame) {
                    head.clear()
                    state = .cutting(cut)
                    continue
                }
                // The header goes on as it came (a new buffer: the decoder may keep this one).
                state = .passing(remaining: frame.payloadLength)
                let bytes = head
                head = ByteBuffer()
                return bytes
            case .header, .passing:
                return passingRun(from: &input)
            }
        }
    }

    /// The bytes at the start of `input` that pass as they came (the rest of a passing frame, whole frames after it),
    /// up to a frame to cut, or to a header the read ends in (kept in `head`); at a frame to cut, its header is taken
    /// and nil returned when no byte before it passes.
    private mutating func passingRun(from input: inout ByteBuffer) -> ByteBuffer? {
        var run = 0
        while run < input.readableBytes {
            switch state {
            case .passing(let remaining):
                let count = min(remaining, input.readableBytes - run)
                run += count
                state = count == remaining ? .header : .passing(remaining: remaining - count)
            case .header:
                guard let frame = FrameHead(input, at: input.readerIndex + run) else {
                    // The read ends inside a header: what came of it waits for the rest.
                    head.writeImmutableBuffer(input.getSlice(at: input.readerIndex + run, length: input.readableBytes - run)!)
                    let bytes = input.readSlice(length: run)!
                    input.moveReaderIndex(to: input.writerIndex)
                    return run > 0 ? bytes : nil
                }
                if let cut = cutting(frame) {
                    // The bytes before it go first; then its fragments.
                    guard run == 0 else { return input.readSlice(length: run) }
                    input.moveReaderIndex(forwardBy: frame.size)
                    state = .cutting(cut)
                    return next(from: &input)
                }
                run += frame.size
                state = .passing(remaining: frame.payloadLength)
            case .cutting:
                preconditionFailure("a frame being cut is not part of a run")
            }
        }
        if case .passing(0) = state { state = .header }
        return run > 0 ? input.readSlice(length: run) : nil
    }

    /// Adds to `head` what the header it holds the start of still needs from `input`; the header once whole.
    private mutating func completeHead(from input: inout ByteBuffer) -> FrameHead? {
        while input.readableBytes > 0 {
            let size = head.readableBytes >= 2 ? FrameHead.size(lengthByte: head.getInteger(at: head.readerIndex + 1)!) : 2
            guard head.readableBytes < size else { break }
            var piece = input.readSlice(length: min(size - head.readableBytes, input.readableBytes))!
            head.writeBuffer(&piece)
        }
        return FrameHead(head, at: head.readerIndex)
    }

    /// How `frame` is cut; nil when it passes as it came.
    private func cutting(_ frame: FrameHead) -> Cut? {
        let isControl = frame.firstByte & 0x08 != 0
        let rsv = frame.firstByte & 0x70
        guard !isControl, frame.payloadLength > maxFragment, frame.payloadLength <= maxFrameSize,
              rsv == 0 || (rsv == 0x40 && knowsRSV1) else { return nil }
        return Cut(firstByte: frame.firstByte, maskKey: frame.maskKey, remaining: frame.payloadLength)
    }

    /// The header of the next fragment of `cut`, which it starts.
    private func fragmentHeader(_ cut: inout Cut) -> ByteBuffer {
        let length = min(maxFragment, cut.remaining)
        let fin: UInt8 = length == cut.remaining ? cut.firstByte & 0x80 : 0
        // RSV bits and opcode on the first fragment; the next are continuations (opcode 0).
        let flags: UInt8 = cut.started ? 0 : cut.firstByte & 0x7F
        cut.started = true
        cut.fragmentLeft = length
        let maskBit: UInt8 = cut.maskKey == nil ? 0 : 0x80
        var header = ByteBufferAllocator().buffer(capacity: FrameHead.maxSize)
        header.writeInteger(fin | flags)
        if length <= 125 {
            header.writeInteger(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            header.writeInteger(maskBit | 126)
            header.writeInteger(UInt16(length))
        } else {
            header.writeInteger(maskBit | 127)
            header.writeInteger(UInt64(length))
        }
        if let key = cut.maskKey { header.writeInteger(key) }
        return header
    }
}

/// A frame's header as RFC 6455 §5.2 lays it out. Pure.
private struct FrameHead {
    static let maxSize = 14
    var firstByte: UInt8
    var maskKey: UInt32?
    /// The declared payload length (`Int.max` for more: the decoder refuses it).
    var payloadLength: Int
    /// The header's size in bytes.
    var size: Int

    /// The size of a header whose second byte is `lengthByte`.
    static func size(lengthByte: UInt8) -> Int {
        let extended = switch lengthByte & 0x7F {
        case 126: 2
        case 127: 8
        default: 0
        }
        return 2 + extended + (lengthByte & 0x80 != 0 ? 4 : 0)
    }

    /// The header at `index` of `buffer`; nil when the buffer ends before it does.
    init?(_ buffer: ByteBuffer, at index: Int) {
        guard let first = buffer.getInteger(at: index, as: UInt8.self),
              let lengthByte = buffer.getInteger(at: index + 1, as: UInt8.self) else { return nil }
        size = FrameHead.size(lengthByte: lengthByte)
        guard buffer.writerIndex - index >= size else { return nil }
        firstByte = first
        switch lengthByte & 0x7F {
        case 126: payloadLength = Int(buffer.getInteger(at: index + 2, as: UInt16.self)!)
        case 127: payloadLength = Int(clamping: buffer.getInteger(at: index + 2, as: UInt64.self)!)
        case let length: payloadLength = Int(length)
        }
        maskKey = lengthByte & 0x80 != 0 ? buffer.getInteger(at: index + size - 4, as: UInt32.self) : nil
    }
}
