import NIOCore

/// Splices two channels: what one reads the other writes, with backpressure both ways (a read is forwarded only
/// while the partner is writable). The shape of swift-nio-examples' connect-proxy. Event-loop bound; both
/// channels must share one event loop.
///
/// Half-closes pass through (both channels allow remote half-closure): one side's end of input shuts the other's
/// output once what was queued for it is written. NIO closes a channel whose input and output are both shut, and
/// the glue then closes its partner: when both directions have ended, both connections close.
///
/// A tunnel is not timed out while both directions are open (SPEC), but a half-closed one is: when `halfOpenLimit`
/// (`--idle-timeout`) passes with no byte either way, both connections close. Before half-closes passed through,
/// a client's close closed the tunnel at once; a server that never closes its side must not hold it forever.
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private let halfOpenLimit: TimeAmount
    /// Reads on this side; the half-open check compares both sides' with what it saw last time.
    private var reads = 0
    private var halfOpenCheck: Scheduled<Void>?

    private init(halfOpenLimit: TimeAmount) { self.halfOpenLimit = halfOpenLimit }

    static func matchedPair(halfOpenLimit: TimeAmount) -> (GlueHandler, GlueHandler) {
        let first = GlueHandler(halfOpenLimit: halfOpenLimit)
        let second = GlueHandler(halfOpenLimit: halfOpenLimit)
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        halfOpenCheck?.cancel()
        halfOpenCheck = nil
        self.context = nil
        partner = nil
    }

    private var readsBothWays: Int { reads + (partner?.reads ?? 0) }

    /// From the first half-close on: closes both sides when a whole `halfOpenLimit` passes with no read either way.
    private func watchHalfOpen(seen: Int) {
        guard let context, halfOpenCheck == nil, partner?.halfOpenCheck == nil else { return }
        halfOpenCheck = context.eventLoop.assumeIsolated().scheduleTask(in: halfOpenLimit) { [self] in
            halfOpenCheck = nil
            guard let context = self.context else { return }
            let now = readsBothWays
            guard now == seen else { return watchHalfOpen(seen: now) }
            partner?.context?.close(promise: nil)
            context.close(promise: nil)
        }
    }

    private func partnerWrite(_ data: NIOAny) { context?.write(data, promise: nil) }
    private func partnerFlush() { context?.flush() }
    /// Half-closes this side once everything queued for it is written.
    private func partnerWriteEOF() {
        afterQueuedWrites { channel in channel.close(mode: .output, promise: nil) }
    }

    /// Closes this side once everything queued for it is written: a plain `close` drops queued writes, and a slow
    /// client would lose the tail of a download whose upstream just closed.
    private func partnerCloseFull() {
        afterQueuedWrites { channel in channel.close(promise: nil) }
    }

    /// Runs `body` when every write queued so far has completed (a zero-length write completes after them).
    private func afterQueuedWrites(_ body: @escaping (any Channel) -> Void) {
        guard let context else { return }
        let channel = context.channel
        context.writeAndFlush(NIOAny(channel.allocator.buffer(capacity: 0))).assumeIsolated().whenComplete { _ in
            body(channel)
        }
    }
    private var partnerWritable: Bool { context?.channel.isWritable ?? false }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reads &+= 1
        partner?.partnerWrite(data)
    }
    func channelReadComplete(context: ChannelHandlerContext) { partner?.partnerFlush() }
    func channelInactive(context: ChannelHandlerContext) { partner?.partnerCloseFull() }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            partner?.partnerWriteEOF()
            watchHalfOpen(seen: readsBothWays)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        partner?.partnerCloseFull()
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.partnerBecameWritable() }
    }

    func read(context: ChannelHandlerContext) {
        if let partner, partner.partnerWritable {
            context.read()
        } else {
            pendingRead = true
        }
    }
}

@available(*, unavailable)
extension GlueHandler: Sendable {}
