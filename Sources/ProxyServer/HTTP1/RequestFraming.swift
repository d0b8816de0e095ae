import NIOHTTP1
import ProxyModel
import ProxyUpstream

/// How a client's request frames its body, read exactly as NIO's parser (llhttp) read it, so the upstream gets the
/// message hookproxy read — and the framings hookproxy refuses because it could not pass that message on unchanged.
///
/// llhttp has already refused what is malformed (Content-Length with Transfer-Encoding, two Content-Lengths, a
/// final coding other than chunked); what remains are heads it accepts whose body hookproxy must not reframe.
enum RequestFraming {
    /// How the body goes upstream: chunked, a known length, or none.
    static func body(of head: HTTPRequestHead, method: String) -> UpstreamRequest.Body {
        if head.headers.contains(name: "transfer-encoding") { return .chunked }
        guard let length = contentLength(head) else { return .none }
        if length == 0 && ["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"].contains(method) { return .none }
        return .length(length)
    }

    /// Why hookproxy refuses this head's framing (a 400), or nil when the body can go upstream as the parser read it.
    static func refusal(_ head: HTTPRequestHead) -> ProxyError? {
        let codings = head.headers["transfer-encoding"]
        if !codings.isEmpty {
            if head.version.major == 1 && head.version.minor == 0 {
                // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
                return ProxyError(.badRequest, "hookproxy: bad request: Transfer-Encoding in an HTTP/1.0 request")
            }
            // The parser de-chunks the body and hands on the bytes of the codings under `chunked` (gzip, …), which
            // hookproxy would send upstream as if they were the content: only `chunked` alone is passed on.
            let listed = codings.joined(separator: ", ")
            for coding in listed.split(separator: ",") where !coding.trimmingSpaces().caseInsensitiveEquals("chunked") {
                return ProxyError(.badRequest, "hookproxy: bad request: Transfer-Encoding '\(listed.prefix(200))': hookproxy passes on request bodies coded only with chunked")
            }
        }
        let length = contentLength(head)
        if let value = head.headers.first(name: "content-length"), length == nil {
            return ProxyError(.badRequest, "hookproxy: bad request: Content-Length \(value.trimmingSpaces().prefix(40)) is too large")
        }
        if head.method == .HEAD, !codings.isEmpty || (length ?? 0) > 0 {
            // RFC 9110 §9.3.2: a body on HEAD means nothing, and may be refused as a smuggling attempt. libcurl
            // cannot send one and still know the answer has no body: it waited for the body the response's
            // Content-Length announced, holding the connection (and every request pipelined behind) until the
            // idle timeout.
            return ProxyError(.badRequest, "hookproxy: bad request: a HEAD request with a body")
        }
        return nil
    }

    /// The Content-Length the parser framed the body by: its digits without the optional whitespace around them
    /// (llhttp accepts `Content-Length: 4 `); nil when there is none, or it does not fit in 63 bits.
    private static func contentLength(_ head: HTTPRequestHead) -> Int64? {
        head.headers.first(name: "content-length").flatMap { Int64($0.trimmingSpaces()) }
    }
}
