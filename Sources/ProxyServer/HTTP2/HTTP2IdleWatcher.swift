import NIOCore
import NIOHTTP2

/// Closes an intercepted HTTP/2 connection that stays silent for the client idle timeout with no stream open;
/// streams in flight are the exchanges' to time out. Sits last in the connection's pipeline, where the HTTP/2
/// handler reports streams opening and closing and `IdleStateHandler` reports silence.
/// Event-loop bound.
final class HTTP2IdleWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let proxy: ProxyContext
    private var openStreams = 0

    init(context: ProxyContext) {
        self.proxy = context
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is NIOHTTP2StreamCreatedEvent:
            openStreams += 1
        case is StreamClosedEvent:
            openStreams = max(0, openStreams - 1)
        case is IdleStateHandler.IdleStateEvent where openStreams == 0:
            proxy.logger.debug("\(context.remoteAddress?.description ?? "client"): HTTP/2 connection idle: closing")
            context.close(promise: nil)
            return
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        proxy.logger.debug("HTTP/2 connection error: \(error)")
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension HTTP2IdleWatcher: Sendable {}
