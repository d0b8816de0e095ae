import NIOCore
import NIOSSL

/// The first handler of an intercepted tunnel: the client's first byte says what it speaks. A TLS handshake record
/// (0x16) gets hookproxy's TLS server (the leaf for the host, then HTTP/1.1 or HTTP/2 by ALPN); anything else is
/// served as plain HTTP for `http://host:port` (Chromium sends `ws://` through a CONNECT tunnel, and a client may
/// tunnel any `http://` URL), so such a client is neither cut off nor logged as one that refused the certificate.
/// A client that sends nothing within `--header-timeout` is closed. Steps out once it has decided.
/// Event-loop bound.
final class TunnelProtocolSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// The first byte of a TLS record carrying a handshake message (RFC 8446 §5.1: ContentType handshake(22)).
    static let tlsHandshakeRecord: UInt8 = 0x16

    private let host: String
    private let target: String
    private let sslContext: NIOSSLContext
    private let proxy: ProxyContext
    private var deadline: Scheduled<Void>?

    init(host: String, target: String, sslContext: NIOSSLContext, proxy: ProxyContext) {
        self.host = host
        self.target = target
        self.sslContext = sslContext
        self.proxy = proxy
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: .milliseconds(Int64(proxy.limits.headerTimeoutMs))) {
            loopBound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return }
        let pipeline = context.pipeline.syncOperations
        do {
            // Added after this handler (the last one now), so the bytes read go on to them.
            if first == Self.tlsHandshakeRecord {
                try pipeline.addHandler(NIOSSLServerHandler(context: sslContext))
                try pipeline.addHandler(InterceptionWatcher(host: host, proxy: proxy))
                try NegotiatedPipeline.addHandlers(to: pipeline, context: proxy, impliedAuthority: target)
            } else {
                proxy.logger.debug("CONNECT \(target): the client speaks plain HTTP in the tunnel, not TLS: served as http://\(target)")
                try ProxyPipeline.addHTTPHandlers(to: pipeline, context: proxy, impliedScheme: "http", impliedAuthority: target)
            }
        } catch {
            proxy.logger.error("CONNECT \(target): cannot start interception: \(error)")
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
        pipeline.removeHandler(self, promise: nil)
    }
}

@available(*, unavailable)
extension TunnelProtocolSniffer: Sendable {}
