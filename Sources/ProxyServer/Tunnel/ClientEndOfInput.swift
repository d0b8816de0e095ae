import NIOCore

/// A blind tunnel carries half-closes: a client that sends its last bytes and shuts its side down (`shutdown(SHUT_WR)`)
/// still gets the upstream's answer. NIO closes a connection at its end of input unless the channel allows remote
/// half-closure, and the HTTP handlers of a proxy connection do not know a half-closed one, so the option is turned
/// on for a client connection only from its CONNECT head on, and only there.
///
/// From the head to the tunnel's start, this handler (first in the pipeline) keeps the end of input from the HTTP
/// handlers: the request decoder, seeing it, would drop the bytes the client sent right after its CONNECT instead of
/// handing them to the tunnel. Once the tunnel is in place the end of input, if it came, goes to the tunnel after
/// those bytes. Event-loop bound.
final class ClientEndOfInput: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var inputClosed = false

    private init() {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            inputClosed = true
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// At a CONNECT head on a plain client connection: half-closure on, the end of input held. Called from the
    /// read that decoded the head, so the option is set before NIO reads anything after it.
    static func hold(_ channel: any Channel) {
        guard let options = channel.syncOptions, (try? options.setOption(.allowRemoteHalfClosure, value: true)) != nil else {
            return
        }
        if (try? channel.pipeline.syncOperations.addHandler(ClientEndOfInput(), position: .first)) == nil {
            try? options.setOption(.allowRemoteHalfClosure, value: false)
        }
    }

    /// The connection became a blind tunnel and what the request decoder held has been handed to it: the end of
    /// input, if it came, goes to the tunnel now; a later one goes there directly.
    static func release(_ channel: any Channel) {
        let pipeline = channel.pipeline.syncOperations
        guard let holder = try? pipeline.handler(type: ClientEndOfInput.self) else { return }
        pipeline.removeHandler(holder, promise: nil)
        if holder.inputClosed { pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
    }

    /// The connection becomes something other than a blind tunnel (an intercepted one): half-closure off again, and a
    /// client that already ended its input is closed, as NIO would have done. Returns whether the connection goes on.
    static func abandon(_ channel: any Channel) -> Bool {
        let pipeline = channel.pipeline.syncOperations
        guard let holder = try? pipeline.handler(type: ClientEndOfInput.self) else { return true }
        pipeline.removeHandler(holder, promise: nil)
        try? channel.syncOptions?.setOption(.allowRemoteHalfClosure, value: false)
        guard !holder.inputClosed else {
            channel.close(promise: nil)
            return false
        }
        return true
    }
}

@available(*, unavailable)
extension ClientEndOfInput: Sendable {}
