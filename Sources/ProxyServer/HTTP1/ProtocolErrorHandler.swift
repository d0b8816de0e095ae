import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyRules

/// Answers requests the HTTP parser rejects: 431 when the head is over the size limit, 400 with the parser's
/// reason otherwise, then closes the connection. If a response is already under way it only closes.
/// Event-loop bound.
final class ProtocolErrorHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let proxy: ProxyContext
    private var responseInFlight = false
    private var failed = false

    init(context: ProxyContext) { self.proxy = context }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        guard !failed else { return }
        failed = true
        // The connection ended inside a head or body (the client left, or hookproxy closed it for a timeout): there
        // is nobody to answer and nothing malformed to report.
        if parserError == .invalidEOFState || !context.channel.isActive {
            proxy.logger.debug("\(context.remoteAddress?.description ?? "client"): connection ended inside a request")
            context.close(promise: nil)
            return
        }
        if parserError == .closedConnection {
            // Bytes after a request that ends the connection (`Connection: close`, HTTP/1.0 without keep-alive):
            // nothing malformed, and nothing to answer. RFC 9112 §9.6: they are not processed, and the client learns
            // so from the close that follows that request's response (the request handler closes once it is out).
            proxy.logger.debug("\(context.remoteAddress?.description ?? "client"): bytes after a request that closes the connection: dropped")
            return
        }
        let error = parserError == .headerOverflow
            ? ProxyError(.headersTooLarge, "hookproxy: request headers exceed \(proxy.limits.maxHeaderBytes) bytes (--max-header-bytes)")
            : ProxyError(.badRequest, "hookproxy: bad request: \(ProtocolErrorHandler.describe(parserError))")
        proxy.logger.warning("\(context.remoteAddress?.description ?? "client"): \(error.message)")
        // A request under way (its body is what failed to parse) ends first, with this reason in its log record.
        context.fireUserInboundEventTriggered(RequestRefused(error: error))
        if responseInFlight {
            context.close(promise: nil)
            return
        }
        var response = LocalResponse.error(error)
        response.head.headers.set("Connection", "close")
        context.write(wrapOutboundOut(.head(response.head.nioHead(version: .http1_1))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        // The client may still be sending (the rest of a body that failed to parse): the answer must not be lost
        // to the reset a close under its unread bytes would bring.
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { [proxy] _ in
            LingeringClose.startDiscardingRequests(context, proxy: proxy)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head: responseInFlight = true
        case .end: responseInFlight = false
        case .body: break
        }
        context.write(data, promise: promise)
    }

    /// Sent on to the request handler when the parser refuses what a client sent: the request under way, if any,
    /// ends with this error before the refusal is written.
    struct RequestRefused {
        let error: ProxyError
    }

    static func describe(_ error: HTTPParserError) -> String {
        switch error {
        case .invalidMethod: "unknown method"
        // llhttp's reasons behind NIO's coarser errors: `.unexpectedContentLength` is only a second Content-Length;
        // `.invalidContentLength` also a Content-Length after Transfer-Encoding; `.unknown` covers a
        // Transfer-Encoding after Content-Length, or one whose last coding is not chunked.
        case .unexpectedContentLength: "two Content-Length fields"
        case .invalidContentLength: "invalid Content-Length (empty, not a number, too large, or together with Transfer-Encoding)"
        case .invalidVersion: "invalid HTTP version"
        case .invalidURL: "invalid request target"
        case .invalidHeaderToken: "invalid character in a header"
        case .invalidChunkSize: "invalid chunk size"
        default: "malformed request (bad syntax, such as a space in the request target, or framing, such as a Transfer-Encoding whose last coding is not chunked, or one with Content-Length)"
        }
    }
}
