import FoundationEssentials
import Glibc
import NIOHTTP1
import ProxyModel

/// Decides what a request head asks for: a URL to fetch, hookproxy's own pages, or nothing valid.
enum RequestClassifier {
    enum Kind: Equatable {
        case forward(RequestHead)
        case ownAddress(path: String)
        case invalid(String)
        /// Inside an intercepted tunnel, an absolute-form target naming another origin than the tunnel's: 421.
        case misdirected(String)
        /// The request carries hookproxy's own loop marker: it came back through hookproxy itself.
        case loop
    }

    static func classify(_ head: HTTPRequestHead, impliedScheme: String, impliedAuthority: String?,
                         listening: (host: String, port: Int)?, loopMarker: String = "") -> Kind {
        let uri = head.uri
        if !loopMarker.isEmpty, head.headers["via"].contains(where: { $0.contains(loopMarker) }) { return .loop }
        if let refusal = hostRefusal(head) { return refusal }
        if let tunnel = impliedAuthority { return classify(head, inTunnelTo: tunnel, scheme: impliedScheme) }
        var headers = HeaderFields(head.headers)
        var url: ProxyURL
        if uri.utf8.first == UInt8(ascii: "/") || uri == "*" {
            // origin-form (or `OPTIONS *`, as curl sends it through a proxy): the Host header names the target
            guard let authority = headers["host"], !authority.isEmpty else {
                return .invalid("\(uri == "*" ? "asterisk-form" : "origin-form") request without a Host header")
            }
            guard let (host, port) = ProxyURL.splitAuthority(Substring(authority), defaultPort: ProxyURL.defaultPort(for: impliedScheme))
            else { return .invalid("invalid Host header '\(authority)'") }
            let (path, query) = ProxyURL.splitTarget(Substring(uri))
            url = ProxyURL(scheme: impliedScheme, host: host, port: port, path: path, query: query)
        } else if let absolute = ProxyURL(string: uri) {
            url = absolute
        } else {
            return .invalid("request target must be an absolute http(s) URL or a path, got '\(uri.prefix(200))'")
        }
        if let refusal = asteriskForm(head, url: &url) { return refusal }
        if let listening, isOwnAddress(url, listening: listening) {
            return .ownAddress(path: url.path)
        }
        HopByHop.strip(&headers)
        // RFC 9112 §3.2.2: the Host of an absolute-form request is the target's authority.
        headers.set("Host", url.authority)
        return .forward(RequestHead(method: head.method.rawValue, url: url, version: HTTPVersionNumber(head.version), headers: headers))
    }

    /// A request inside an intercepted tunnel: its target is the CONNECT authority, whatever the request names, as
    /// the client's TLS connection would have reached that server without hookproxy (mitmproxy does the same). An
    /// origin-form request keeps its `Host` (a server behind the authority may serve several names); an
    /// absolute-form one naming another origin is misdirected (421: the client may retry on a connection of its
    /// own), so a client cannot make hookproxy fetch a host its CONNECT did not name.
    static func classify(_ head: HTTPRequestHead, inTunnelTo tunnel: String, scheme: String) -> Kind {
        let uri = head.uri
        guard let (host, port) = ProxyURL.splitAuthority(Substring(tunnel), defaultPort: ProxyURL.defaultPort(for: scheme))
        else { return .invalid("invalid tunnel authority '\(tunnel.prefix(200))'") }
        var headers = HeaderFields(head.headers)
        var url: ProxyURL
        if uri.utf8.first == UInt8(ascii: "/") || uri == "*" {
            let (path, query) = ProxyURL.splitTarget(Substring(uri))
            url = ProxyURL(scheme: scheme, host: host, port: port, path: path, query: query)
        } else if let absolute = ProxyURL(string: uri) {
            guard absolute.scheme == scheme, absolute.host.lowercased() == host.lowercased(), absolute.port == port else {
                let named = "\(absolute.scheme)://\(absolute.authority)"
                return .misdirected("hookproxy: misdirected request: \(named) asked inside the tunnel to \(tunnel) (CONNECT names the only server a tunnel reaches)")
            }
            url = absolute
            headers.set("Host", url.authority)
        } else {
            return .invalid("request target must be a path or an absolute \(scheme) URL, got '\(uri.prefix(200))'")
        }
        if let refusal = asteriskForm(head, url: &url) { return refusal }
        HopByHop.strip(&headers)
        if headers["host"]?.isEmpty ?? true { headers.set("Host", url.authority) }
        return .forward(RequestHead(method: head.method.rawValue, url: url, version: HTTPVersionNumber(head.version), headers: headers))
    }

    /// A request to a `--reverse` listener: its target's path and query (origin-form, or the path of an
    /// absolute-form target, whose authority is ignored) joined to the route's URL, `Host` set to the route's
    /// authority, hop-by-hop headers removed. Never hookproxy's own pages, never another host.
    static func classify(_ head: HTTPRequestHead, reverse: ReverseRoute, loopMarker: String = "") -> Kind {
        let uri = head.uri
        if !loopMarker.isEmpty, head.headers["via"].contains(where: { $0.contains(loopMarker) }) { return .loop }
        if let refusal = hostRefusal(head) { return refusal }
        let path: String
        let query: String?
        if uri.utf8.first == UInt8(ascii: "/") || uri == "*" {
            (path, query) = ProxyURL.splitTarget(Substring(uri))
        } else if let absolute = ProxyURL(string: uri) {
            let asterisk = head.method == .OPTIONS && absolute.query == nil && ProxyURL.hasEmptyPath(uri)
            (path, query) = asterisk ? ("*", nil) : (absolute.path, absolute.query)
        } else {
            return .invalid("request target must be a path or an absolute http(s) URL, got '\(uri.prefix(200))'")
        }
        if let refusal = reverse.refusal(path: path) { return .invalid(refusal) }
        var url = reverse.upstreamURL(path: path == "*" ? "/" : path, query: query)
        // `OPTIONS *` asks about the server as a whole: the route's path does not apply.
        if path == "*" { url = .asterisk(scheme: url.scheme, host: url.host, port: url.port) }
        if let refusal = asteriskForm(head, url: &url) { return refusal }
        var headers = HeaderFields(head.headers)
        HopByHop.strip(&headers)
        headers.set("Host", url.authority)
        return .forward(RequestHead(method: head.method.rawValue, url: url, version: HTTPVersionNumber(head.version), headers: headers))
    }

    /// RFC 9112 §3.2.4: the asterisk-form target (`*`) is for `OPTIONS` only, and an absolute-form `OPTIONS` with
    /// an empty path and no query (`OPTIONS http://host:port`) goes on as `OPTIONS *`. `url` becomes the asterisk
    /// form then; another method with `*` is refused.
    private static func asteriskForm(_ head: HTTPRequestHead, url: inout ProxyURL) -> Kind? {
        let isOptions = head.method == .OPTIONS
        if url.isAsterisk {
            return isOptions ? nil : .invalid("the request target '*' is for OPTIONS only, not \(head.method.rawValue)")
        }
        if isOptions, url.path == "/", url.query == nil, head.uri.utf8.first != UInt8(ascii: "/"), ProxyURL.hasEmptyPath(head.uri) {
            url = .asterisk(scheme: url.scheme, host: url.host, port: url.port)
        }
        return nil
    }

    /// RFC 9112 §3.2: a request with more than one Host field gets 400 (hookproxy would route by the first, and
    /// a server behind another intermediary might read the last).
    private static func hostRefusal(_ head: HTTPRequestHead) -> Kind? {
        var hosts = 0
        for field in head.headers where field.name.caseInsensitiveEquals("host") {
            hosts += 1
            if hosts > 1 {
                // Over HTTP/2 a second Host is RequestAuthority's mark of a `host` that disagrees with `:authority`.
                return .invalid(head.version.major >= 2 ? "a host field that names another server than :authority, or more than one host field (RFC 9113 §8.3.1)"
                                                         : "more than one Host header")
            }
        }
        return nil
    }

    static func isOwnAddress(_ url: ProxyURL, listening: (host: String, port: Int)) -> Bool {
        guard url.scheme == "http", url.port == listening.port else { return false }
        var host = url.host.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        if host == listening.host { return true }
        return isLoopback(host) && (isLoopback(listening.host) || isAnyAddress(listening.host))
    }

    /// `localhost`, and every spelling of a loopback address the resolver accepts without DNS: `127.1`,
    /// `0x7f000001`, `2130706433`, `::1`, `::ffff:127.0.0.1`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        var v4 = in_addr()
        if inet_aton(host, &v4) != 0 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes == [UInt8](repeating: 0, count: 15) + [1] { return true }
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }

    static func isAnyAddress(_ host: String) -> Bool { host == "0.0.0.0" || host == "::" || host.isEmpty }
}
