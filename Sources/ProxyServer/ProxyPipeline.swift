import NIOCore
import NIOHTTP1
import NIOSSL
import ProxyModel
import ProxyRules

/// Builds the handlers of a new client connection: HTTP/1 codec (with the header-size limit), pipelining
/// assistance (`PipeliningGate`), the protocol-error answerer (400/431 and close), and the proxy request handler.
/// A connection to a `--reverse` listener gets the same handlers, behind TLS when the route speaks it, with the route
/// as the request handler's fixed target.
enum ProxyPipeline {
    static func configure(_ channel: any Channel, context: ProxyContext, reverse: ReverseRoute? = nil,
                          tls: NIOSSLContext? = nil) throws {
        guard context.connections.admit(channel) else {
            reportRefusals(context, on: channel.eventLoop)
            let refusal = LocalResponse.error(ProxyError(.tooManyConnections, "hookproxy: too many connections (limit \(context.connections.limit))"))
            channel.writeAndFlush(channel.allocator.buffer(string: refusal.closingHTTP1Bytes()))
                .whenComplete { _ in channel.close(promise: nil) }
            return
        }
        channel.closeFuture.whenComplete { _ in context.connections.remove(channel) }
        // First in the pipeline, so it sees the raw bytes (TLS included) both ways; the request handler decides
        // what a silence means (ProxyRequestHandler.userInboundEventTriggered).
        let idle = TimeAmount.milliseconds(Int64(context.limits.clientIdleTimeoutMs))
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(IdleWatch(timeout: idle))
        if let tls, let reverse {
            try pipeline.addHandler(NIOSSLServerHandler(context: tls))
            try pipeline.addHandler(InterceptionWatcher(host: reverse.target.host, proxy: context))
            // HTTP/2 when the client picks it (both kinds of listener certificate offer `h2` and `http/1.1`).
            try NegotiatedPipeline.addHandlers(to: pipeline, context: context, impliedScheme: reverse.target.scheme,
                                               reverse: reverse)
            return
        }
        try addHTTPHandlers(to: pipeline, context: context, impliedScheme: reverse?.target.scheme ?? "http",
                            reverse: reverse)
    }

    /// One warning for the connections refused over the last second, not one per connection: a flood stays
    /// readable.
    private static func reportRefusals(_ context: ProxyContext, on loop: any EventLoop) {
        let tracker = context.connections
        if let refused = tracker.refusalsToReport() {
            let count = refused == 1 ? "a connection" : "\(refused) connections"
            context.logger.warning("too many connections (limit \(tracker.limit)): answered 503 to \(count)")
        } else if tracker.claimLaterReport() {
            loop.scheduleTask(in: ConnectionTracker.reportInterval) { reportRefusals(context, on: loop) }
        }
    }

    static func addHTTPHandlers(to pipeline: ChannelPipeline.SynchronousOperations, context: ProxyContext,
                                impliedScheme: String = "http", impliedAuthority: String? = nil,
                                reverse: ReverseRoute? = nil) throws {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = context.limits.maxHeaderBytes
        limits.maxHeaderFieldSize = context.limits.maxHeaderBytes
        // An upgrade configuration with no upgraders: nothing is ever upgraded, but NIO then builds the decoder to
        // forward, rather than drop, what it holds when it is removed — the bytes a client sends right after its
        // CONNECT. The (upgrader-less) upgrade handler steps out at the first request.
        try pipeline.configureHTTPServerPipeline(
            withPipeliningAssistance: false,
            withServerUpgrade: (upgraders: [], completionHandler: { _ in }),
            withErrorHandling: false,
            withOutboundHeaderValidation: true,
            withEncoderConfiguration: .init(),
            withDecoderLimitConfiguration: limits
        )
        // Our own pipelining assistance (PipeliningGate), right after the decoder, where NIO's would be.
        let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        try pipeline.addHandler(PipeliningGate(), position: .after(decoder))
        try pipeline.addHandler(ProtocolErrorHandler(context: context))
        try pipeline.addHandler(ProxyRequestHandler(context: context, impliedScheme: impliedScheme,
                                                    impliedAuthority: impliedAuthority, reverse: reverse))
    }
}
