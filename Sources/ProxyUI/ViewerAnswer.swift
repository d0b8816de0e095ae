import ProxyModel

/// What the viewer answers one request with: a whole response, a download made in parts, or the start of the
/// `/api/events` stream. A value.
public enum ViewerAnswer: Sendable {
    case response(ResponseHead, [UInt8])
    /// A response whose body is made a part at a time while the client reads it (no `Content-Length`).
    case download(ResponseHead, FlowDownload)
    /// Server-sent events from the present moment on.
    case events

    /// A complete answer with the headers every viewer response carries (no caching, no sniffing, no framing, no
    /// referrer; never any CORS header).
    static func make(_ status: Int, _ body: [UInt8], contentType: String, extra: [(String, String)] = []) -> ViewerAnswer {
        var headers: HeaderFields = [("Content-Type", contentType), ("Content-Length", String(body.count))]
        for (name, value) in ViewerAnswer.commonHeaders + extra { headers.add(name, value) }
        return .response(ResponseHead(status: status, headers: headers), body)
    }

    static func json(_ status: Int, _ body: [UInt8], extra: [(String, String)] = []) -> ViewerAnswer {
        make(status, body, contentType: "application/json", extra: extra)
    }

    static func problem(_ status: Int, _ message: String, extra: [(String, String)] = []) -> ViewerAnswer {
        json(status, FlowJSON.error(message), extra: extra)
    }

    public static let commonHeaders: [(String, String)] = [
        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
    ]

    /// The page's own policy: its scripts, styles and data only from itself (images also as data: URLs).
    static let pagePolicy = ("Content-Security-Policy",
                             "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
    /// Captured bodies are whatever a server sent: never run as the viewer's own page.
    static let bodyPolicy = ("Content-Security-Policy", "sandbox; default-src 'none'")

    public var status: Int {
        switch self {
        case .response(let head, _), .download(let head, _): head.status
        case .events: 200
        }
    }
}
