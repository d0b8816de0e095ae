import NIOHTTP1
import ProxyModel
import Testing
@testable import ProxyServer

/// Issue 18, item 1: `--reverse LISTEN=URL` values, the path-prefix join, and how a reverse listener classifies a
/// request head (no socket; the integration tests are `ReverseProxyTests`).
@Suite struct ReverseRouteTests {
    @Test func tlsFollowsTheURLSchemeUnlessTheListenAddressSaysOtherwise() throws {
        let https = try ReverseRoute(parsing: "127.0.0.1:9443=https://api.example.com")
        #expect(https.tls && https.listenHost == "127.0.0.1" && https.listenPort == 9443)
        #expect(https.target.description == "https://api.example.com/")
        let http = try ReverseRoute(parsing: "localhost:0=http://127.0.0.1:9000/v2")
        #expect(!http.tls && http.listenHost == "localhost" && http.listenPort == 0)
        #expect(http.target.port == 9000 && http.target.path == "/v2")
        #expect(try !ReverseRoute(parsing: "http://127.0.0.1:9000=https://api.example.com").tls)
        #expect(try ReverseRoute(parsing: "HTTPS://127.0.0.1:9443=http://127.0.0.1:9000").tls)
        let v6 = try ReverseRoute(parsing: "[::1]:9000=http://[::1]:8000")
        #expect(v6.listenHost == "::1" && v6.target.host == "::1" && v6.target.port == 8000)
    }

    @Test(arguments: [
        ("127.0.0.1:9000", "no '='"),
        ("127.0.0.1=http://a.example", "not HOST:PORT"),
        ("127.0.0.1:70000=http://a.example", "not HOST:PORT"),
        (":9000=http://a.example", "not HOST:PORT"),
        ("bad host:9000=http://a.example", "not HOST:PORT"),
        ("127.0.0.1:9000=ftp://a.example", "is not an http:// or https:// URL"),
        ("127.0.0.1:9000=", "is not an http:// or https:// URL"),
        ("127.0.0.1:9000=http://a.example/x?y=1", "no query or fragment"),
        ("127.0.0.1:9000=http://user:pw@a.example", "may not hold credentials"),
    ])
    func malformedValuesNameTheValueAndTheReason(_ value: String, _ reason: String) {
        #expect {
            try ReverseRoute(parsing: value)
        } throws: { error in
            let text = "\(error)"
            return text.contains("--reverse '\(value)'") && text.contains(reason) && text.contains("HOST:PORT=URL")
        }
    }

    @Test(arguments: [
        ("http://o.example", "/", nil as String?, "http://o.example/"),
        ("http://o.example", "/users", "page=2", "http://o.example/users?page=2"),
        ("http://o.example/v2", "/users", nil, "http://o.example/v2/users"),
        ("http://o.example/v2/", "/users", nil, "http://o.example/v2/users"),
        ("http://o.example/v2", "/", nil, "http://o.example/v2/"),
        ("https://o.example:8443/a/b", "/c/d", "x=1", "https://o.example:8443/a/b/c/d?x=1"),
        // Under a prefix, dot segments cannot climb out of it; without one the path goes on as written.
        ("http://o.example/v2", "/../admin", nil, "http://o.example/v2/admin"),
        ("http://o.example/v2/", "/a/%2e%2e/%2E%2E/../admin", "k=..", "http://o.example/v2/admin?k=.."),
        ("http://o.example/v2", "/a/./b/..", nil, "http://o.example/v2/a/"),
        ("http://o.example", "/../admin", nil, "http://o.example/../admin"),
    ])
    func thePathPrefixJoinsWithOneSlash(_ target: String, _ path: String, _ query: String?, _ expected: String) throws {
        let route = try ReverseRoute(parsing: "127.0.0.1:0=\(target)")
        #expect(route.upstreamURL(path: path, query: query).description == expected)
    }

    @Test func aRequestGoesToTheRouteWithHostRewrittenWhateverItsTargetNames() throws {
        let route = try ReverseRoute(parsing: "127.0.0.1:9000=https://api.example.com:8443/v1")
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/users?id=7")
        head.headers.add(name: "Host", value: "127.0.0.1:9000")
        head.headers.add(name: "Connection", value: "keep-alive, X-Hop")
        head.headers.add(name: "X-Hop", value: "1")
        head.headers.add(name: "X-Kept", value: "2")
        guard case .forward(let request) = RequestClassifier.classify(head, reverse: route) else {
            Issue.record("not forwarded")
            return
        }
        #expect(request.url.description == "https://api.example.com:8443/v1/users?id=7")
        #expect(request.headers["host"] == "api.example.com:8443")
        #expect(request.headers["x-hop"] == nil && request.headers["connection"] == nil)
        #expect(request.headers["x-kept"] == "2")
        // absolute form: only its path and query count, never its authority (a reverse listener is no open proxy)
        let absolute = HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://elsewhere.example/x?y")
        guard case .forward(let other) = RequestClassifier.classify(absolute, reverse: route) else {
            Issue.record("absolute form not forwarded")
            return
        }
        #expect(other.url.description == "https://api.example.com:8443/v1/x?y")
        // `*` is for OPTIONS only (which goes on as `OPTIONS *`: AsteriskFormTests)
        #expect(RequestClassifier.classify(HTTPRequestHead(version: .http1_1, method: .GET, uri: "*"), reverse: route)
                == .invalid("the request target '*' is for OPTIONS only, not GET"))
    }

    @Test func theLoopMarkerIsRecognised() throws {
        let route = try ReverseRoute(parsing: "127.0.0.1:9000=http://127.0.0.1:9000")
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
        head.headers.add(name: "Via", value: "1.1 hookproxy-abc")
        #expect(RequestClassifier.classify(head, reverse: route, loopMarker: "1.1 hookproxy-abc") == .loop)
    }
}
