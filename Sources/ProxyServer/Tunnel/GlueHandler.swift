import NIOCore

/// Splices two channels: what one reads the other writes, with backpressure both ways (a read is forwarded only
/// while the partner is writable). The shape of swift-nio-examples' connect-proxy. Event-loop bound; both
/// channels must share one event loop.
///
/// Half-closes pass through (both channels allow remote half-closure): one side's end of input shuts the other's
/// output once what was queued for it is written. NIO closes a channel whose input and output are both shut, and
/// the glue then closes its partner: when both directions have ended, both connections close.
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    private init() {}

    static func matchedPair() -> (GlueHandler, GlueHandler) {
        let first = GlueHandler()
        let second = GlueHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
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

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { partner?.partnerWrite(data) }
    func channelReadComplete(context: ChannelHandlerContext) { partner?.partnerFlush() }
    func channelInactive(context: ChannelHandlerContext) { partner?.partnerCloseFull() }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            partner?.partnerWriteEOF()
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
