import NIOCore
import NIOHTTP1

/// Closes a client connection without losing what is still on its way to the client. Closing a socket while bytes
/// the peer sent sit unread in it makes the kernel reset the connection (RFC 1122 §4.2.2.13), and the reset destroys
/// what the kernel had not yet delivered: a WebSocket client that was still sending when its session ended got
/// neither the close frame nor the frames before it, and an HTTP client that writes its whole upload before reading
/// (Python's `http.client`, `requests`) got a reset instead of the 502 that ended its request early. So the output is
/// shut down once everything written has left (NIO queues the shutdown behind the pending writes: a FIN after the
/// last byte), what the client still sends is read and dropped, and the connection closes when the client closes its
/// side (NIO closes a channel at its end of input, half-closure being off), or once a whole `timeout`
/// (`--idle-timeout`) passed in which the client took nothing (`ClientDrainWatch`): a client that reads slowly gets
/// every byte, and one that reads nothing, or keeps its side open once it has everything, is let go (at once, under
/// TLS too: `ImmediateClose`). Where the output
/// cannot be shut down alone (TLS that cannot), it closes at once, as before. A lingering connection gives up its
/// `--max-connections` slot to a new connection that would otherwise be refused (`ConnectionTracker`). Event-loop
/// bound.
enum LingeringClose {
    /// For a relay, whose handler drops what it still reads.
    static func start(_ context: ChannelHandlerContext, proxy: ProxyContext) {
        guard context.channel.isActive else { return }
        shutOutput(context, proxy: proxy)
        context.read()
    }

    /// For an HTTP/1 connection: what the client still sends (the rest of a request body, pipelined requests) is
    /// dropped before the request decoder (`InputDiscarder`), so nothing after the response is parsed or answered.
    static func startDiscardingRequests(_ context: ChannelHandlerContext, proxy: ProxyContext) {
        guard context.channel.isActive else { return }
        let pipeline = context.pipeline.syncOperations
        guard let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self),
              (try? pipeline.addHandler(InputDiscarder(), position: .before(decoder))) != nil else {
            return context.close(promise: nil)
        }
        shutOutput(context, proxy: proxy)
    }

    private static func shutOutput(_ context: ChannelHandlerContext, proxy: ProxyContext) {
        let channel = context.channel
        proxy.connections.noteLingering(channel)
        let timeout = TimeAmount.milliseconds(Int64(proxy.limits.clientIdleTimeoutMs))
        let bound = ClientDrainWatch(timeout: timeout, everythingQueued: true)
        bound.start(context) { ImmediateClose.close(channel) }
        channel.closeFuture.assumeIsolated().whenComplete { _ in bound.cancel() }
        let shut = channel.eventLoop.makePromise(of: Void.self)
        shut.futureResult.whenFailure { _ in channel.close(promise: nil) }
        context.close(mode: .output, promise: shut)
    }
}

/// Reads and drops every byte that reaches it, asking for the next read itself (whatever the handlers behind it
/// hold): a lingering close's input side (`LingeringClose.startDiscardingRequests`). Event-loop bound.
final class InputDiscarder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func channelReadComplete(context: ChannelHandlerContext) {
        context.read()
    }
}

@available(*, unavailable)
extension InputDiscarder: Sendable {}
