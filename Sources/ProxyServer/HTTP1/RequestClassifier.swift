import NIOHTTP1
import ProxyModel

/// Decides what a request head asks for: a URL to fetch, hookproxy's own pages, or nothing valid.
enum RequestClassifier {
    enum Kind: Equatable {
        case forward(RequestHead)
        case ownAddress(path: String)
        case invalid(String)
    }

    static func classify(_ head: HTTPRequestHead, impliedScheme: String, impliedAuthority: String?,
                         listening: (host: String, port: Int)?) -> Kind {
        let uri = head.uri
        var headers = HeaderFields(head.headers)
        let url: ProxyURL
        if uri.hasPrefix("/") {
            // origin-form: the Host header (or the intercepted tunnel's host) names the target
            guard let authority = headers["host"] ?? impliedAuthority, !authority.isEmpty else {
                return .invalid("origin-form request without a Host header")
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
        if impliedAuthority == nil, let listening, isOwnAddress(url, listening: listening) {
            return .ownAddress(path: url.path)
        }
        HopByHop.strip(&headers)
        // RFC 9112 §3.2.2: the Host of an absolute-form request is the target's authority.
        headers.set("Host", url.authority)
        return .forward(RequestHead(method: head.method.rawValue, url: url, version: HTTPVersionNumber(head.version), headers: headers))
    }

    static func isOwnAddress(_ url: ProxyURL, listening: (host: String, port: Int)) -> Bool {
        guard url.scheme == "http", url.port == listening.port else { return false }
        let loopback = ["127.0.0.1", "localhost", "::1", "0.0.0.0"]
        let host = url.host
        return host.caseInsensitiveEquals(listening.host)
            || (loopback.contains { host.caseInsensitiveEquals($0) } && loopback.contains(listening.host))
    }
}
