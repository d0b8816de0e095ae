import NIOCore

/// `FrameSplitter` in a pipeline, just in front of a `WebSocketFrameDecoder`: the bytes it reads go to the decoder
/// with the big data frames among them cut into fragments. In the client connection's pipeline, and in the
/// `EmbeddedChannel` that decodes the server's frames. The client connection's event loop.
final class FrameSplittingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var splitter: FrameSplitter

    init(_ splitter: FrameSplitter) {
        self.splitter = splitter
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        while let bytes = splitter.next(from: &input) {
            context.fireChannelRead(wrapInboundOut(bytes))
        }
    }
}

@available(*, unavailable)
extension FrameSplittingHandler: Sendable {}
