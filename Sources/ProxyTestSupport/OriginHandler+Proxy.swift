import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyModel

// Upstream-proxy mode (TestOrigin.start(proxyAuth:)): check Proxy-Authorization, then forward an absolute-form
// http:// request (body already buffered; the response relayed part by part) or tunnel a CONNECT.
// Test-sized traffic only: the relay does not apply backpressure. Event-loop thread only.
extension OriginHandler {
    func isProxyRequest(_ head: HTTPRequestHead) -> Bool {
        configuration.proxyCredentials != nil
            && (head.method == .CONNECT || head.uri.hasPrefix("http://") || head.uri.hasPrefix("https://"))
    }

    func serveProxyRequest(context: ChannelHandlerContext, request: Incoming) {
        let method = request.head.method
        guard let credentials = configuration.proxyCredentials,
            request.head.headers.first(name: "Proxy-Authorization")
                == "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
        else {
            // NIO frames any answer to CONNECT as bodiless, so the client cannot tell where a 407 body ends:
            // close after it, as real proxies do.
            if method == .CONNECT { closeAfterResponse = true }
            return respond(context: context, method: method, status: 407,
                           headers: [("Proxy-Authenticate", "Basic realm=\"upstream\"")],
                           text: "proxy authentication required\n")
        }
        if method == .CONNECT {
            let authority = Substring(request.head.uri)
            guard let (host, port) = ProxyURL.splitAuthority(authority, defaultPort: 443) else {
                return respond(context: context, method: method, status: 400, text: "bad CONNECT target\n")
            }
            return tunnel(context: context, host: host, port: port)
        }
        guard let url = ProxyURL(string: request.head.uri), url.scheme == "http" else {
            return respond(context: context, method: method, status: 501, text: "only http:// is forwarded\n")
        }
        guard request.bodyCount == request.body.count else {
            return respond(context: context, method: method, status: 413, text: "body too large to forward\n")
        }
        forward(context: context, request: request, url: url)
    }

    private func forward(context: ChannelHandlerContext, request: Incoming, url: ProxyURL) {
        var head = HTTPRequestHead(version: .http1_1, method: request.head.method, uri: url.pathAndQuery)
        for field in request.head.headers {
            let name = field.name.lowercased()
            if ["proxy-authorization", "proxy-connection", "connection", "keep-alive"].contains(name) { continue }
            head.headers.add(name: field.name, value: field.value)
        }
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        let body = request.body
        let relay = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let isHead = request.head.method == .HEAD
        ClientBootstrap(group: context.eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseRelay(relay: relay, isHead: isHead))
                }
            }
            .connect(host: url.host, port: url.port)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    channel.write(HTTPClientRequestPart.head(head), promise: nil)
                    if !body.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                case .failure(let error):
                    respond(context: context, method: request.head.method, status: 502,
                            text: "upstream proxy: cannot connect to \(url.authority): \(error)\n")
                }
            }
    }

    /// Relays one upstream response part to the client (called by ResponseRelay on the same event loop).
    func relay(context: ChannelHandlerContext, _ part: HTTPClientResponsePart) {
        guard active else { return }
        switch part {
        case .head(let head):
            var fields = head.headers
            fields.remove(name: "Connection")
            if closeAfterResponse { fields.replaceOrAdd(name: "Connection", value: "close") }
            let response = HTTPResponseHead(version: .http1_1, status: head.status, headers: fields)
            context.write(wrapOutboundOut(.head(response)), promise: nil)
        case .body(let buffer):
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        case .end:
            finish(context: context)
        }
    }

    private func tunnel(context: ChannelHandlerContext, host: String, port: Int) {
        let server = context.channel
        ClientBootstrap(group: context.eventLoop)
            .connect(host: host, port: port)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .failure(let error):
                    respond(context: context, method: .CONNECT, status: 502,
                            text: "upstream proxy: cannot connect to \(host):\(port): \(error)\n")
                case .success(let upstream):
                    do {
                        let pipeline = server.pipeline.syncOperations
                        try upstream.pipeline.syncOperations.addHandler(TunnelGlue(partner: server))
                        try pipeline.addHandler(TunnelGlue(partner: upstream))
                        // Take out the HTTP handlers, decoder last: the bytes it holds go on to the glue.
                        let handlers: [any RemovableChannelHandler] = Array(httpHandlers.dropLast()) + [self]
                        for handler in handlers { _ = pipeline.removeHandler(handler) }
                        if let decoder = httpHandlers.last { _ = pipeline.removeHandler(decoder) }
                        // Written raw: NIO's encoder would frame a length-less 200 as chunked.
                        server.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 Connection Established\r\n\r\n"),
                                             promise: nil)
                    } catch {
                        upstream.close(promise: nil)
                        server.close(promise: nil)
                    }
                }
            }
    }
}

/// Hands an upstream response to the OriginHandler that asked for it. Same event loop; event-loop thread only.
final class ResponseRelay: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    let relay: NIOLoopBound<(OriginHandler, ChannelHandlerContext)>
    let isHead: Bool
    var ended = false

    init(relay: NIOLoopBound<(OriginHandler, ChannelHandlerContext)>, isHead: Bool) {
        self.relay = relay
        self.isHead = isHead
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        let (handler, origin) = relay.value
        handler.relay(context: origin, part)
        if case .end = part {
            ended = true
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !ended {
            let (_, origin) = relay.value
            origin.close(promise: nil)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// One half of a CONNECT tunnel: what this channel reads is written to `partner`; either side closing closes
/// both. No backpressure (test-sized traffic). Event-loop thread only.
final class TunnelGlue: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let partner: any Channel

    init(partner: any Channel) { self.partner = partner }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ResponseRelay: Sendable {}
@available(*, unavailable)
extension TunnelGlue: Sendable {}
