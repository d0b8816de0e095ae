import NIOCore
import NIOHTTP2
import ProxyModel

/// Gives a request stream's head the `:authority` that NIO's HTTP/2-to-HTTP/1 codec requires, when the client left it
/// out. RFC 9113 §8.3.1 makes `:authority` optional; without it the codec failed the stream, and the client saw a
/// bare RST_STREAM (CANCEL) with no log line. The authority comes from the request's `host` field when it has one
/// (a request converted from HTTP/1.1 may carry that instead), else from what the connection implies (an
/// intercepted tunnel's CONNECT target, a reverse listener's server): the request is then served as an HTTP/1.1
/// request without `Host` is in the same place.
///
/// A `host` beside `:authority` that names another server makes two Host fields of it, for the classifier's 400.
///
/// Only the stream's first HEADERS frame is its head; a later one (trailers) passes as it is. Loop-bound: one per
/// stream channel, before the codec.
final class RequestAuthority: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    private let implied: String?
    private var headSeen = false
    /// The stream is a CONNECT: its head went on as a complete request, the frames after it are dropped.
    private var refusingConnect = false

    init(implied: String?) {
        self.implied = implied
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refusingConnect { return }  // a CONNECT's DATA: no tunnel opens, so nothing of it goes anywhere
        guard !headSeen, case .headers(var headers) = unwrapInboundIn(data) else {
            return context.fireChannelRead(data)
        }
        headSeen = true
        if headers.headers.first(name: ":method") == "CONNECT", !headers.headers.contains(name: ":path") {
            // RFC 9113 §8.5: a CONNECT has neither `:scheme` nor `:path`, and NIO's codec failed the stream for the
            // missing `:path` with a bare RST_STREAM. Given its authority as the path, it reaches the request
            // handler, which answers it (421 in a tunnel, 400 at a reverse listener) and logs it.
            // Ended here: the handler answers a request once it is complete, and a CONNECT's stream stays open.
            headers.headers.add(name: ":scheme", value: "https")
            headers.headers.add(name: ":path", value: headers.headers.first(name: ":authority") ?? "")
            headers.endStream = true
            refusingConnect = true
            return context.fireChannelRead(wrapInboundOut(.headers(headers)))
        }
        guard let authority = headers.headers.first(name: ":authority") else {
            if let authority = headers.headers.first(name: "host") ?? implied {
                headers.headers.add(name: ":authority", value: authority)
                return context.fireChannelRead(wrapInboundOut(.headers(headers)))
            }
            return context.fireChannelRead(data)
        }
        let scheme = headers.headers.first(name: ":scheme") ?? "https"
        if headers.headers["host"].contains(where: { !Self.sameAuthority($0, authority, scheme: scheme) }) {
            // RFC 9113 §8.3.1: a `host` that names another entity than `:authority` makes the request malformed. NIO's
            // codec would forward the `host` and drop `:authority`, so the upstream answered for one host while
            // the log and the rules saw the other. A second `host` with `:authority`'s value makes the request one
            // with two Host fields, which the classifier answers with 400 (and logs) as it does over HTTP/1.1.
            headers.headers.add(name: "host", value: authority)
            return context.fireChannelRead(wrapInboundOut(.headers(headers)))
        }
        context.fireChannelRead(data)
    }

    /// Whether two authorities name the same server: equal but for ASCII case, or for the scheme's default port.
    static func sameAuthority(_ a: String, _ b: String, scheme: String) -> Bool {
        let defaultPort = scheme.caseInsensitiveEquals("http") ? ":80" : ":443"
        func bare(_ authority: String) -> Substring {
            let text = Substring(authority)
            guard text.utf8.count > defaultPort.utf8.count, text.hasSuffix(defaultPort) else { return text }
            // Only the port: what is left names a host without one (`h:1:443` is no spelling of `h:1`).
            let host = text.dropLast(defaultPort.count)
            let afterBracket = host.lastIndex(of: "]").map { host[host.index(after: $0)...] } ?? host
            return afterBracket.contains(":") ? text : host
        }
        return String(bare(a)).caseInsensitiveEquals(String(bare(b)))
    }
}

@available(*, unavailable)
extension RequestAuthority: Sendable {}
