import NIOCore
import ProxyModel
import ProxyUpstream

/// An upgrade to a protocol other than WebSocket that the server accepted with 101: the bytes are relayed as they
/// come, both ways, with the same backpressure as a WebSocket session, and counted for the log. When either side
/// leaves, what was already taken from it still goes to the other before that connection closes, bounded by
/// `--idle-timeout` both ways: toward the server by `UpstreamConnection.closeWhenSent`, toward the client by
/// `ClientDrainWatch` (after the end, `LingeringClose`).
///
/// Threading: the client connection's event loop; the last handler of the client's pipeline.
final class RawUpgradeRelay: ChannelDuplexHandler, UpgradeRelay {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let handshake: UpgradeHandshake
    private let upstream: UpstreamConnection
    private var context: ChannelHandlerContext?
    private var log: WebSocketLog
    private var reads = ReadGate()
    private var ended = false
    /// The server closed its side (the rest of what it sent may still be on its way to the client).
    private var serverFinished = false
    private let drain: ClientDrainWatch

    init(handshake: UpgradeHandshake, upstream: UpstreamConnection) {
        self.handshake = handshake
        self.upstream = upstream
        self.log = WebSocketLog(protocolName: handshake.protocolName)
        self.drain = ClientDrainWatch(timeout: handshake.clientIdleTimeout)
    }

    func install(on pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(self)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The HTTP handler held reading when the upgrade request ended: reading starts again here.
        context.read()
    }

    /// The context holds this handler: keeping it would keep both (and the channel) alive after the close.
    func handlerRemoved(context: ChannelHandlerContext) {
        drain.cancel()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ended else { return }  // read only to be dropped (`LingeringClose`)
        let bytes = unwrapInboundIn(data)
        log.sentBytes += bytes.readableBytes
        if upstream.write(bytes) > WebSocketSession.highWater { reads.pause() }
    }

    func read(context: ChannelHandlerContext) {
        reads.read(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { upstream.setReading(true) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(by: .client, "client closed the connection", sendingRest: true)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(by: .client, "client connection failed: \(error)", sendingRest: Self.clientLeft(error))
    }

    func clientClosed() { end(by: .client, "client closed the connection", sendingRest: true) }

    func upstreamReceived(_ bytes: ByteBuffer) {
        guard let context else { return }
        log.receivedBytes += bytes.readableBytes
        drain.noteDelivered()
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        // A failed write can end the relay inside the flush (the client reset the connection).
        if !ended, !context.channel.isWritable {
            upstream.setReading(false)
            watchClientDrain()  // a client that takes nothing does not hold an open relay for good
        }
    }

    func upstreamWritable() {
        reads.resume(context)
    }

    func upstreamClosed(_ error: ProxyError?) {
        end(by: .server, error?.message ?? "server closed the connection")
    }

    func upstreamFinishedSending() {
        serverFinished = true
        watchClientDrain()
    }

    /// From the server's end on: a client that takes nothing for `--idle-timeout` is let go, and the session ends.
    private func watchClientDrain() {
        guard let context else { return }
        drain.start(context) { [self] in
            let finished = serverFinished || ended
            // What the client sent before still reaches an open relay's server, and its connection closes with a
            // FIN, not a reset under its unread bytes.
            end(by: finished ? .server : .client, handshake.clientStalledReason(serverFinished: finished), sendingRest: true)
            if let channel = self.context?.channel { ImmediateClose.close(channel) }
        }
    }

    /// Ends the relay once. With `sendingRest` (the client left) the bytes still queued for the server go out before
    /// its connection closes; else (the server left, an error) it closes at once.
    private func end(by side: WebSocketLog.Close.Side, _ reason: String, sendingRest: Bool = false) {
        guard !ended else { return }
        ended = true
        log.close = WebSocketLog.Close(code: nil, reason: reason, by: side)
        if sendingRest {
            upstream.closeWhenSent(idleTimeout: handshake.upstreamIdleTimeout)
        } else {
            upstream.close()
        }
        if let context, context.channel.isActive {
            // Everything written still goes out, and what the client still sends cannot reset the connection under
            // it (`LingeringClose`).
            context.flush()
            reads.resume(context)
            LingeringClose.start(context, proxy: handshake.proxy)
        }
        handshake.sessionEnded(log)
    }
}

@available(*, unavailable)
extension RawUpgradeRelay: Sendable {}
