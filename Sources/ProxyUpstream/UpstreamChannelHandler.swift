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
/// `setReading(false)` holds the server back. NIO still reads on its own when the server closes or resets (it drains
/// the socket to the end then): what comes while reading is held waits here, the close after it, until reading
/// resumes (as with curl, which does not look at the socket then); the connection is told at once that the server
/// finished sending, so a relay can bound its wait for a client that no longer takes bytes.
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
    /// True while `write` is inside NIO (a close then is a failed write).
    private var writing = false
    /// A write failed, or the connection closed with bytes still to send: it is broken, and that is reported at
    /// once even while reading is held (as the curl carrier does; what was held is dropped).
    private var writeFailed = false
    /// Bytes NIO read while reading was held, and the close that followed them (`.some(why)`), for the resume.
    private var held = CircularBuffer<ByteBuffer>()
    private var heldClose: String?? = .none
    /// Whether a zero-length write waits behind the backlog (to say when it is gone).
    private var drainWatched = false
    /// Bytes queued since the last flush.
    private var batch = 0
    /// The last flush (or the drain after it) left nothing waiting.
    private var wasEmpty = true

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

    /// Queues `bytes` on the channel; they go out at the next `flush`.
    func queue(_ bytes: ByteBuffer) {
        batch += bytes.readableBytes
        context?.write(wrapOutboundOut(bytes), promise: nil)
    }

    /// Sends what was queued; returns the bytes still waiting. When some are, the connection hears when all are
    /// gone (`channelWritable`), however few they were: NIO's writability changes only past its water marks.
    func flush() -> Int {
        guard let context else { return 0 }
        // NIO reports a failed write by closing the channel, with no `errorCaught`: a close inside this call is one.
        writing = true
        context.flush()
        writing = false
        let waiting = sentEverything(context) ? 0 : bufferedBytes
        batch = 0
        wasEmpty = waiting == 0
        if waiting > 0 { watchDrain(context) }
        return waiting
    }

    /// Whether the flush just made sent everything, known without asking the channel (`bufferedBytes`, an option
    /// lookup through NIO's generic code: ~2 k instructions, a thirtieth of a WebSocket round trip). The channel's
    /// water marks are both 1 byte (`open`): it turns unwritable once more than one byte waits, at the write, and
    /// writable again only once none does. So a batch of two bytes or more queued onto an empty channel made it
    /// unwritable, and if it is writable again, nothing waits. Otherwise (a 1-byte batch, bytes left from before, an
    /// unwritable channel) the channel is asked.
    private func sentEverything(_ context: ChannelHandlerContext) -> Bool {
        wasEmpty && batch >= 2 && context.channel.isWritable
    }

    /// A zero-length write after the backlog: it completes when everything before it is written.
    private func watchDrain(_ context: ChannelHandlerContext) {
        guard !drainWatched else { return }
        drainWatched = true
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: promise)
        promise.futureResult.assumeIsolated().whenComplete { [self] result in
            drainWatched = false
            if case .failure(let error) = result {
                // The channel closed with bytes still waiting for the server (this runs before the close reaches
                // `channelInactive`): they are lost, so the connection failed, whatever closed it (a write error,
                // a reset, the server's close). Our own close silenced the connection first.
                if connection != nil {
                    if failure == nil { failure = error is ChannelError ? UpstreamWriteFailed() : error }
                    writeFailed = true
                }
                return
            }
            guard let context = self.context, context.channel.isActive else { return }
            if bufferedBytes == 0 {
                wasEmpty = true
                connection?.channelWritable()
            } else {
                watchDrain(context)
            }
        }
    }

    func setReading(_ on: Bool) {
        reading = on
        guard on else { return }
        deliverHeld()
        requestRead()
    }

    /// Hands over what NIO read while reading was held, then the close that followed, while reading stays on.
    private func deliverHeld() {
        while reading, let connection, let bytes = held.popFirst() { connection.channelReceived(bytes) }
        guard reading, held.isEmpty, case .some(let why) = heldClose, let connection else { return }
        heldClose = .none
        self.connection = nil
        connection.channelClosed(why)
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
        guard let connection else { return }
        if reading && held.isEmpty {
            connection.channelReceived(unwrapInboundIn(data))
        } else {
            held.append(unwrapInboundIn(data))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readPending = false
        requestRead()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard let connection else { return }
        if writing && failure == nil {
            failure = UpstreamWriteFailed()
            writeFailed = true
        }
        let why = failure.map { "\($0)" }
        guard (reading && held.isEmpty) || writeFailed else {
            heldClose = .some(why)  // after the bytes held, when reading resumes
            connection.channelClosedBehindHeldBytes()  // but the relay may want to know now (a client not reading)
            return
        }
        self.connection = nil
        connection.channelClosed(why)
    }
}

@available(*, unavailable)
extension UpstreamChannelHandler: Sendable {}

/// The connection closed while hookproxy still had bytes for the server (NIO says no more).
struct UpstreamWriteFailed: Error, CustomStringConvertible {
    var description: String { "the connection closed while hookproxy was sending to the server" }
}

extension UpstreamChannelHandler {
    /// Puts a duplicate of curl's `socket` on a NIO channel of `loop` and calls `done` on the loop with its handler,
    /// or with nil when it cannot (no descriptor left, NIO refused): curl then carries the bytes.
    static func open(_ socket: Int32, on loop: any EventLoop, for connection: UpstreamConnection,
                     _ done: @escaping (UpstreamChannelHandler?) -> Void) {
        // Close-on-exec, like every descriptor hookproxy opens (a bare `dup` would not carry it over).
        let duplicate = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return done(nil) }
        let opened = ClientBootstrap(group: loop)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // Writable exactly while nothing waits (`sentEverything`); nothing else here reads writability.
            .channelOption(.writeBufferWaterMark, value: .init(low: 1, high: 1))
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
