import NIOCore
import NIOSSL

/// Closes a client connection at once, under its TLS if it has any. Closed through the pipeline, NIOSSL sends
/// close_notify and then keeps the socket open for up to its shutdown timeout (5 s) waiting for the client's: right
/// for a connection that ends the ordinary way, not for a client let go because it took nothing for `--idle-timeout`
/// (a lingering close, a relay's stalled client, a download nobody reads), which will not answer either. Such a
/// client was let go 5 s after the timeout through interception, at the timeout elsewhere. Event-loop bound.
enum ImmediateClose {
    /// A client that still reads (its channel writable) gets TLS's ordinary close; one that stopped, this one.
    static func closeUnlessReading(_ channel: any Channel) {
        if channel.isWritable { channel.close(promise: nil) } else { close(channel) }
    }

    static func close(_ channel: any Channel) {
        let pipeline = channel.pipeline.syncOperations
        // A handler in front of the TLS one, whose own close goes straight to the socket.
        guard (try? pipeline.handler(type: NIOSSLServerHandler.self)) != nil,
              (try? pipeline.addHandler(SocketCloser(), position: .first)) != nil else {
            return channel.close(promise: nil)
        }
    }
}

/// Closes its channel as it is added, from the front of the pipeline: no handler but the channel's own sees the close.
private final class SocketCloser: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension SocketCloser: Sendable {}
