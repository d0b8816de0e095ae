// The bytes one side of a WebSocket session sends. Input: byte 0 picks the side (bit 0: the client, whose frames are
// masked), whether `permessage-deflate` was agreed (bit 1) and the fragment size the splitter cuts at (bits 2-4:
// 4 to 32 bytes, so that cutting happens at every size); bytes 1-8 give the sizes of the reads the stream arrives in
// (1 to 64 bytes each, in turn); the rest is the stream. It goes through `FrameSplitter` read by read, as
// `FrameSplittingHandler` feeds it, and then through NIO's `WebSocketFrameDecoder`, as in the session; the frames
// decoded then go where `WebSocketSession.process` takes them: `FrameRules`, `CloseFrame.violation`, and
// `MessageFlow.take` (inflating under `permessage-deflate`). The unsplit stream goes through the same decoder.
// Oracle besides "no crash": cutting changes no byte of what a message carries. The data payloads decoded from the
// split stream (unmasked, in order) start with those decoded from the unsplit one, and equal them when the unsplit
// stream ended at a frame's end without an error; the control frames agree the same way; the split stream fails
// when the unsplit one does (but for a stream ending inside an oversized frame's header, which the splitter holds
// whole), and only then; and no data frame decoded from it is over the fragment size unless a frame was
// left uncut (an RSV bit that no agreement defines, a frame over the decoder's limit).
import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOWebSocket
import ProxyModel
@testable import ProxyServer

let maxFrameSize = 1 << 16

/// What a decoder made of a stream: data payloads (unmasked) end to end, control frames, whether it failed, whether
/// the frames it decoded ended exactly at the stream's end, and the frames themselves.
struct Decoded {
    var data: [UInt8] = []
    var controls: [[UInt8]] = []
    var failed = false
    var frames: [WebSocketFrame] = []
}

func decode(_ reads: [ByteBuffer]) -> Decoded {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
    var out = Decoded()
    do {
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
        for read in reads {
            try channel.writeInbound(read)
            while let frame = try channel.readInbound(as: WebSocketFrame.self) {
                out.frames.append(frame)
                let payload = Array(frame.unmaskedData.readableBytesView)
                if frame.opcode == .connectionClose || frame.opcode == .ping || frame.opcode == .pong {
                    out.controls.append([UInt8(webSocketOpcode: frame.opcode)] + payload)
                } else {
                    out.data += payload
                }
            }
        }
    } catch {
        out.failed = true
    }
    return out
}

/// Where `bytes` end, read as frames: at a frame's end, inside a frame's header, or inside its payload.
enum StreamEnd {
    case boundary, insideHeader, insidePayload
}

func streamEnd(_ bytes: [UInt8]) -> StreamEnd {
    var at = 0
    while at < bytes.count {
        guard at + 2 <= bytes.count else { return .insideHeader }
        let masked = bytes[at + 1] & 0x80 != 0
        var length = Int(bytes[at + 1] & 0x7F)
        var start = at + 2
        if length == 126 {
            guard start + 2 <= bytes.count else { return .insideHeader }
            length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
            start += 2
        } else if length == 127 {
            guard start + 8 <= bytes.count else { return .insideHeader }
            let wide = bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            length = wide > UInt64(Int.max / 2) ? Int.max / 2 : Int(wide)
            start += 8
        }
        if masked { start += 4 }
        guard start <= bytes.count else { return .insideHeader }
        guard length <= bytes.count - start else { return .insidePayload }
        at = start + length
    }
    return .boundary
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let setup = input.byte()
    let fromClient = setup & 1 == 1
    let deflate = setup & 2 == 2
    let maxFragment = 4 * (1 + Int((setup >> 2) & 7))
    let readSizes = (0..<8).map { _ in 1 + Int(input.byte() & 63) }
    let stream = input.rest()

    // The stream in reads, through the splitter as FrameSplittingHandler feeds it.
    var splitter = FrameSplitter(maxFragment: maxFragment, maxFrameSize: maxFrameSize, knowsRSV1: deflate)
    var reads: [ByteBuffer] = []
    var split: [ByteBuffer] = []
    var at = 0
    var turn = 0
    while at < stream.count {
        let count = min(readSizes[turn % readSizes.count], stream.count - at)
        var read = ByteBuffer(bytes: stream[at..<at + count])
        reads.append(read)
        while let bytes = splitter.next(from: &read) { split.append(bytes) }
        if read.readableBytes != 0 { fuzzFail("the splitter left \(read.readableBytes) bytes of a read unread") }
        at += count
        turn += 1
    }

    let whole = decode(reads)
    let cut = decode(split)
    let end = streamEnd(stream)
    // The splitter holds a header until its last byte (its masking key included), where the decoder refuses a
    // frame over its limit as soon as the length is in: a stream ending inside such a header fails only unsplit.
    if whole.failed != cut.failed, !(whole.failed && end == .insideHeader) {
        fuzzFail("the unsplit stream \(whole.failed ? "fails" : "decodes"), the split one \(cut.failed ? "fails" : "decodes")")
    }
    if !cut.data.starts(with: whole.data) { fuzzFail("cutting changed the data bytes: \(whole.data.count) vs \(cut.data.count)") }
    if !cut.controls.starts(with: whole.controls) { fuzzFail("cutting changed the control frames") }
    if !whole.failed, end == .boundary {
        if cut.data != whole.data { fuzzFail("cutting added data bytes to a stream that ended at a frame's end") }
        if cut.controls != whole.controls { fuzzFail("cutting added control frames to a stream that ended at a frame's end") }
    }
    let leftUncut = whole.frames.contains { $0.rsv2 || $0.rsv3 || ($0.rsv1 && !deflate) } || whole.failed
        || end != .boundary
    if !leftUncut, let big = cut.frames.first(where: { $0.opcode != .connectionClose && $0.opcode != .ping && $0.opcode != .pong && $0.data.readableBytes > maxFragment }) {
        fuzzFail("a data frame of \(big.data.readableBytes) bytes passed a splitter cutting at \(maxFragment)")
    }

    // What the session does with each frame.
    let agreement = deflate ? ["permessage-deflate"] : []
    let rules = FrameRules(serverAnswer: agreement)
    var flow = MessageFlow(direction: fromClient ? .send : .receive, transform: nil,
                           inflater: deflate ? MessageInflater(windowBits: 15, noContextTakeover: false) : nil)
    for frame in cut.frames {
        _ = rules.violation(frame, fromClient: fromClient)
        let plain = frame.unmaskedFrame
        switch plain.opcode {
        case .connectionClose:
            if let (code, _) = CloseFrame.violation(plain.data), ![1002, 1007].contains(code) {
                fuzzFail("a close frame refused with code \(code)")
            }
        case .ping, .pong:
            break
        default:
            let taken = flow.take(plain, room: 4096)
            if let message = taken.message, message.data.readableBytes > 4096 {
                fuzzFail("the log kept \(message.data.readableBytes) bytes of a message, room 4096")
            }
            if taken.failure != nil { return 0 }  // the session ends here
        }
    }
    _ = flow.unfinished()
    return 0
}

@_cdecl("fuzz_websocket_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
