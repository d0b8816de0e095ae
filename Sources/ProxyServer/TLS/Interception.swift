import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS
import ProxyModel
import ProxyRules

/// `CONNECT` to an intercepted host: answers 200, terminates the client's TLS with a leaf the CA minted for the
/// host, and serves what follows as `https://host:port/…` requests through the same pipeline as plain HTTP (over
/// HTTP/2 when the client picks `h2`: `NegotiatedPipeline`); a client that speaks plain HTTP in the tunnel instead
/// is served as `http://host:port/…` (`TunnelProtocolSniffer`).
/// Runs on the client connection's event loop.
enum Interception {
    static func start(host: String, request: RequestContext, handler: ProxyRequestHandler, context: ChannelHandlerContext) {
        let target = request.head.uri
        let proxy = handler.proxy
        let channel = context.channel
        proxy.interception.context(for: host, on: context.eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .failure(let error):
                let message = "hookproxy: cannot intercept \(target): \(error)"
                proxy.logger.error("\(message)")
                handler.answerConnect(ProxyError(.tlsFailed, message), request: request)
            case .success(let sslContext):
                handler.becomeTunnelAfter200(install: { pipeline in
                    try pipeline.addHandler(TunnelProtocolSniffer(host: host, target: target, sslContext: sslContext, proxy: proxy))
                }, done: { result in
                    guard case .failure(let failure) = result, let error = failure.error else { return }
                    proxy.logger.error("CONNECT \(target): cannot start interception: \(error)")
                    channel.close(promise: nil)
                })
            }
        }
    }
}

/// Watches the client's TLS handshake on an intercepted connection: a failure before it completes means the
/// client refused hookproxy's certificate (pinning, or the CA is not trusted). Event-loop bound.
final class InterceptionWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let host: String
    private let proxy: ProxyContext
    private var handshakeCompleted = false

    init(host: String, proxy: ProxyContext) {
        self.host = host
        self.proxy = proxy
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent { handshakeCompleted = true }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !handshakeCompleted else {
            context.fireErrorCaught(error)
            return
        }
        proxy.clientRefusedInterception(host: host)
        proxy.logger.debug("TLS handshake with the client for \(host) failed: \(error)")
        context.close(promise: nil)
    }
}
