import NIOCore
import NIOHTTP2

/// Gives a request stream's head the `:authority` that NIO's HTTP/2-to-HTTP/1 codec requires, when the client left it
/// out. RFC 9113 §8.3.1 makes `:authority` optional; without it the codec failed the stream, and the client saw a
/// bare RST_STREAM (CANCEL) with no log line. The authority comes from the request's `host` field when it has one
/// (a request converted from HTTP/1.1 may carry that instead), else from what the connection implies (an
/// intercepted tunnel's CONNECT target, a reverse listener's server): the request is then served as an HTTP/1.1
/// request without `Host` is in the same place.
///
/// Only the stream's first HEADERS frame is its head; a later one (trailers) passes as it is. Loop-bound: one per
/// stream channel, before the codec.
final class RequestAuthority: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    private let implied: String?
    private var headSeen = false

    init(implied: String?) {
        self.implied = implied
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !headSeen, case .headers(var headers) = unwrapInboundIn(data) else {
            return context.fireChannelRead(data)
        }
        headSeen = true
        if !headers.headers.contains(name: ":authority"),
           let authority = headers.headers.first(name: "host") ?? implied {
            headers.headers.add(name: ":authority", value: authority)
            return context.fireChannelRead(wrapInboundOut(.headers(headers)))
        }
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension RequestAuthority: Sendable {}
