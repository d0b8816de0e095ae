import Glibc
import NIOCore
import NIOPosix
import ProxyModel

/// Carries a handed-over connection's bytes on a NIO channel of the connection's own event loop, when curl has no
/// TLS on it (a `ws://` upstream, or one tunnelled through a plain upstream proxy): the loop's selector then says when
/// the socket is ready, and no byte goes through the socket watcher thread and back.
///
/// The channel owns a duplicate of curl's descriptor (`dup`): curl keeps its own until the connection is released,
/// and the socket closes when both are closed. Reading is explicit (`autoRead` off), one read per request, so that
/// `setReading(false)` holds the server back.
///
/// Loop-bound: the last handler of the channel's pipeline, on the connection's loop.
final class UpstreamChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The connection it reports to; nil once the connection closed it (then nothing more is reported).
    weak var connection: UpstreamConnection?
    private var context: ChannelHandlerContext?
    private var reading = true
    private var readPending = false
    private var failure: (any Error)?

    init(connection: UpstreamConnection) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Bytes queued on the channel and not yet taken by the socket.
    var bufferedBytes: Int {
        guard let context else { return 0 }
        return (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    /// Writes and flushes `bytes`; returns the bytes still queued.
    func write(_ bytes: ByteBuffer) -> Int {
        guard let context else { return 0 }
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        return bufferedBytes
    }

    func setReading(_ on: Bool) {
        reading = on
        if on { requestRead() }
    }

    /// Asks for the next read unless one is pending or reading is held.
    func requestRead() {
        guard reading, !readPending, let context, context.channel.isActive else { return }
        readPending = true
        context.read()
    }

    /// Closes the channel; the connection hears nothing more.
    func close() {
        connection = nil
        context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.channelReceived(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readPending = false
        requestRead()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { connection?.channelWritable() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard let connection else { return }
        self.connection = nil
        connection.channelClosed(failure.map { "\($0)" })
    }
}

@available(*, unavailable)
extension UpstreamChannelHandler: Sendable {}

extension UpstreamChannelHandler {
    /// Puts a duplicate of curl's `socket` on a NIO channel of `loop` and calls `done` on the loop with its handler,
    /// or with nil when it cannot (no descriptor left, NIO refused): curl then carries the bytes.
    static func open(_ socket: Int32, on loop: any EventLoop, for connection: UpstreamConnection,
                     _ done: @escaping (UpstreamChannelHandler?) -> Void) {
        let duplicate = dup(socket)
        guard duplicate >= 0 else { return done(nil) }
        let opened = ClientBootstrap(group: loop)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .withConnectedSocket(duplicate)
        opened.assumeIsolated().whenComplete { result in
            // NIO closed the duplicate if it failed.
            guard case .success(let channel) = result else { return done(nil) }
            let handler = UpstreamChannelHandler(connection: connection)
            do {
                try channel.pipeline.syncOperations.addHandler(handler)
            } catch {
                channel.close(promise: nil)
                return done(nil)
            }
            done(handler)
        }
    }
}
