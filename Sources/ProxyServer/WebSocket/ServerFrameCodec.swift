import NIOCore
import NIOEmbedded
import NIOWebSocket

/// NIO's WebSocket frame decoder and encoder for the server's side of a session, which is bytes in and out of an
/// `UpstreamConnection`, not a channel: the two handlers run in an `EmbeddedChannel`, with a tap at each end that
/// takes what comes out (the frames decoded, the bytes encoded) as it comes. The embedded channel's own buffers
/// would cost a queue, a flush and a dynamic cast for every frame and every buffer read back.
///
/// What the taps collected is handed on only after the pipeline call returns, so that what the caller does with it
/// (end the session, `finish` this codec) never runs inside the decoder or the encoder.
/// Event-loop bound (the session's).
final class ServerFrameCodec {
    private let channel = EmbeddedChannel()
    private let frames = FrameTap()
    private let bytes = ByteTap()

    /// `splitter` cuts big data frames into fragments in front of the decoder (nil: frames are decoded whole).
    init(splitter: FrameSplitter?, maxFrameSize: Int) throws {
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(bytes)  // first: what the encoder writes stops here
        if let splitter { try pipeline.addHandler(FrameSplittingHandler(splitter)) }
        try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
        try pipeline.addHandler(WebSocketFrameEncoder())
        try pipeline.addHandler(frames)  // last: the decoded frames stop here
    }

    /// Decodes `input` and calls `body` with each frame it completed, in order. Returns the error that stopped the
    /// decoder, if one did: the frames decoded before it still come first. After an error nothing more is decoded.
    func decode(_ input: ByteBuffer, _ body: (WebSocketFrame) -> Void) -> (any Error)? {
        let pipeline = channel.pipeline.syncOperations
        pipeline.fireChannelRead(NIOAny(input))
        pipeline.fireChannelReadComplete()
        // By index, not a copy of the array: emptied afterwards, it keeps its storage for the next call.
        var index = 0
        while index < frames.decoded.count {
            body(frames.decoded[index])
            index += 1
        }
        frames.decoded.removeAll(keepingCapacity: true)
        defer { frames.error = nil }
        return frames.error
    }

    /// Encodes `frame` and calls `body` with its bytes, in order: the header, then the payload (the header may come
    /// in front of the payload, in one buffer).
    func encode(_ frame: WebSocketFrame, _ body: (ByteBuffer) -> Void) throws {
        channel.pipeline.syncOperations.writeAndFlush(NIOAny(frame), promise: nil)
        if let error = frames.error {
            frames.error = nil
            throw error
        }
        var index = 0
        while index < bytes.written.count {
            body(bytes.written[index])
            index += 1
        }
        bytes.written.removeAll(keepingCapacity: true)
    }

    /// Ends the embedded channel: the handlers leave, and what a decoder held is dropped.
    func finish() {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}

/// The last inbound handler of `ServerFrameCodec`'s channel: keeps the frames and the error the decoder gives.
private final class FrameTap: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame

    var decoded: [WebSocketFrame] = []
    var error: (any Error)?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoded.append(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.error == nil { self.error = error }
    }
}

/// The first outbound handler of `ServerFrameCodec`'s channel: keeps the buffers the encoder writes.
private final class ByteTap: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer

    var written: [ByteBuffer] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        written.append(unwrapOutboundIn(data))
        promise?.succeed()
    }

    func flush(context: ChannelHandlerContext) {}
}

@available(*, unavailable)
extension ServerFrameCodec: Sendable {}
