import ProxyModel

/// One `--reverse LISTEN=URL`: hookproxy listens on LISTEN as the origin would, and forwards every request that
/// arrives there to URL (its scheme, host, port and path prefix), with `Host` set to URL's authority.
///
/// LISTEN is `HOST:PORT` (`[v6]:PORT` for IPv6; port 0 picks a free port), optionally prefixed by `http://` or
/// `https://` to choose whether the listener speaks TLS. Without a prefix it speaks TLS exactly when URL is `https`
/// (it stands where that server stands). URL is `http(s)://host[:port][/path-prefix]`: no query, fragment or
/// credentials.
public struct ReverseRoute: Sendable, Hashable, CustomStringConvertible {
    public var listenHost: String
    public var listenPort: Int
    /// Whether clients talk TLS to the listener.
    public var tls: Bool
    /// Where requests go; `target.path` is the prefix joined before every request path (`/` for none).
    public var target: ProxyURL
    /// The value as the user wrote it, for messages.
    public var text: String

    public init(listenHost: String, listenPort: Int, tls: Bool, target: ProxyURL, text: String? = nil) {
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.tls = tls
        self.target = target
        self.text = text ?? "\(tls ? "https" : "http")://\(listenHost):\(listenPort)=\(target)"
    }

    /// Parses `[http://|https://]HOST:PORT=URL`.
    public init(parsing text: String) throws(ReverseRouteError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw ReverseRouteError(text, "no '=' between the listen address and the URL")
        }
        var listen = text[..<equals]
        let urlText = String(text[text.index(after: equals)...])
        var explicitTLS: Bool?
        if listen.lowercased().hasPrefix("https://") {
            explicitTLS = true
            listen = listen.dropFirst(8)
        } else if listen.lowercased().hasPrefix("http://") {
            explicitTLS = false
            listen = listen.dropFirst(7)
        }
        guard let (host, port) = Self.splitListen(listen) else {
            throw ReverseRouteError(text, "the listen address '\(listen)' is not HOST:PORT (e.g. 127.0.0.1:9443)")
        }
        guard let target = ProxyURL(string: urlText) else {
            throw ReverseRouteError(text, "'\(urlText)' is not an http:// or https:// URL with a valid host")
        }
        if urlText.contains("?") || urlText.contains("#") {
            throw ReverseRouteError(text, "the URL may hold a path prefix but no query or fragment")
        }
        let authorityEnd = urlText.dropFirst(target.scheme.count + 3).firstIndex(of: "/") ?? urlText.endIndex
        if urlText[..<authorityEnd].contains("@") {
            throw ReverseRouteError(text, "the URL may not hold credentials; set an Authorization header with a rule's request.set_headers")
        }
        self.init(listenHost: host, listenPort: port, tls: explicitTLS ?? (target.scheme == "https"),
                  target: target, text: text)
    }

    /// `HOST:PORT` or `[v6]:PORT`, port 0...65535.
    private static func splitListen(_ listen: Substring) -> (String, Int)? {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port) else { return nil }
        var host = listen[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty, !host.contains("/"), ProxyURL.isValidHost(String(host), bracketed: host.contains(":"))
        else { return nil }
        return (String(host), port)
    }

    /// The upstream URL of a request whose target is `path` (and `query`): the route's path prefix, then `path`,
    /// with one `/` between them. `/v2` + `/users` → `/v2/users`; `/v2/` + `/` → `/v2/`; `/` + `/users` → `/users`.
    /// Under a prefix, `path`'s dot segments are removed first (as nginx and the origin itself would), so a
    /// `/../admin` stays inside it: `/v2` + `/../admin` → `/v2/admin`, not `/v2/../admin`, which the origin reads as
    /// `/admin`. Without one the path goes on as the client wrote it.
    public func upstreamURL(path: String, query: String?) -> ProxyURL {
        var prefix = target.path
        while prefix.utf8.last == UInt8(ascii: "/") { prefix.removeLast() }
        var suffix = path.utf8.first == UInt8(ascii: "/") ? path : "/" + path
        if !prefix.isEmpty { suffix = ProxyURL.removingDotSegments(suffix) }
        return ProxyURL(scheme: target.scheme, host: target.host, port: target.port, path: prefix + suffix, query: query)
    }

    /// Why a request for `path` is refused (400), or nil: under a path prefix, a segment some origins read as a dot
    /// segment and others do not (`..%2F`, `..\`, `..;`), which could climb out of the prefix at the origin.
    public func refusal(path: String) -> String? {
        guard target.path.utf8.contains(where: { $0 != UInt8(ascii: "/") }),
              let segment = ProxyURL.ambiguousDotSegment(in: path) else { return nil }
        return "the path segment '\(segment.prefix(200))' may be a dot segment to the server (an encoded slash or backslash, or a ';' parameter, beside '.' or '..'); under --reverse \(text) it could reach outside \(target.path)"
    }

    public var description: String { text }
}

/// A `--reverse` value that cannot be used; the message quotes it and says what is expected.
public struct ReverseRouteError: Error, CustomStringConvertible {
    public let description: String

    init(_ value: String, _ reason: String) {
        description = "--reverse '\(value)': \(reason); expected [http://|https://]HOST:PORT=URL, e.g. 127.0.0.1:9443=https://api.example.com"
    }
}
