import NIOCore
import NIOTLS

/// Closes an intercepted connection whose client has not finished its TLS handshake within `--header-timeout` (a
/// stalled handshake must not hold a connection slot). It sits before the ALPN step, which installs the request
/// handlers (and their own deadlines) only once the handshake is done, and steps out then.
/// Event-loop bound.
final class HandshakeDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let timeoutMs: Int
    private var deadline: Scheduled<Void>?

    init(timeoutMs: Int) {
        self.timeoutMs = timeoutMs
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: .milliseconds(Int64(timeoutMs))) {
            loopBound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)  // first: once removed, this context forwards nothing
        if case .handshakeCompleted = event as? TLSUserEvent {
            deadline?.cancel()
            deadline = nil
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
    }
}

@available(*, unavailable)
extension HandshakeDeadline: Sendable {}
