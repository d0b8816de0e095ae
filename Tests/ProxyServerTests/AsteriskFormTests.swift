import NIOHTTP1
import ProxyModel
import Testing
@testable import ProxyServer

/// RFC 9112 §3.2.4, `OPTIONS *`: the asterisk form as curl sends it through a proxy (`OPTIONS *` with the origin in
/// `Host`), the absolute form with an empty path that a proxy must forward as `*`, inside a tunnel and at a
/// `--reverse` listener; and `*` refused for any other method. No socket (`AsteriskFormProxyTests` has them).
@Suite struct AsteriskFormTests {
    static func head(_ method: HTTPMethod, _ uri: String, host: String? = nil) -> HTTPRequestHead {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        if let host { head.headers.add(name: "Host", value: host) }
        return head
    }

    static func forwarded(_ kind: RequestClassifier.Kind) -> ProxyURL? {
        guard case .forward(let request) = kind else { return nil }
        return request.url
    }

    static func classify(_ head: HTTPRequestHead) -> RequestClassifier.Kind {
        RequestClassifier.classify(head, impliedScheme: "http", impliedAuthority: nil, listening: ("127.0.0.1", 8080))
    }

    @Test func theAsteriskFormGoesToTheOriginItsHostNames() throws {
        let url = try #require(Self.forwarded(Self.classify(Self.head(.OPTIONS, "*", host: "example.com:81"))))
        #expect(url.isAsterisk && url.host == "example.com" && url.port == 81)
        #expect(url.pathAndQuery == "*", "what curl is given as the request target")
        #expect(url.description == "http://example.com:81", "logged in the absolute form that means it")
    }

    @Test func anAbsoluteFormOPTIONSWithAnEmptyPathGoesOnAsAnAsterisk() throws {
        for uri in ["http://example.com:81", "http://example.com:81#top", "https://example.com"] {
            let url = try #require(Self.forwarded(Self.classify(Self.head(.OPTIONS, uri))))
            #expect(url.isAsterisk, "\(uri)")
        }
        for uri in ["http://example.com:81/", "http://example.com:81?q=1", "http://example.com/x"] {
            let url = try #require(Self.forwarded(Self.classify(Self.head(.OPTIONS, uri))))
            #expect(!url.isAsterisk, "\(uri): a path or a query is a resource")
        }
        // Other methods keep `/` for an empty path (RFC 9112 §3.2.1).
        let get = try #require(Self.forwarded(Self.classify(Self.head(.GET, "http://example.com:81"))))
        #expect(get.path == "/")
    }

    @Test(arguments: [HTTPMethod.GET, .POST, .DELETE])
    func theAsteriskIsForOPTIONSOnly(method: HTTPMethod) {
        guard case .invalid(let reason) = Self.classify(Self.head(method, "*", host: "example.com")) else {
            Issue.record("\(method) * was not refused")
            return
        }
        #expect(reason.contains("for OPTIONS only"))
    }

    @Test func hookproxyItselfAnswersItsOwnAsterisk() {
        #expect(Self.classify(Self.head(.OPTIONS, "*", host: "127.0.0.1:8080")) == .ownAddress(path: "*"))
        let answer = OnboardingPage.response(for: "*", ca: LazyCertificateAuthority(directory: "/nonexistent"))
        #expect(answer.head.status == 200)
        #expect(answer.head.headers["allow"]?.contains("CONNECT") == true)
    }

    @Test func insideATunnelAndAtAReverseListenerTheAsteriskStays() throws {
        let tunnel = RequestClassifier.classify(Self.head(.OPTIONS, "*", host: "api.example.com"), inTunnelTo: "api.example.com:443",
                                                scheme: "https")
        #expect(Self.forwarded(tunnel)?.isAsterisk == true)
        #expect(Self.forwarded(tunnel)?.description == "https://api.example.com")
        let route = try ReverseRoute(parsing: "127.0.0.1:9000=http://127.0.0.1:7000/v2")
        for uri in ["*", "http://127.0.0.1:9000"] {
            let reverse = try #require(Self.forwarded(RequestClassifier.classify(Self.head(.OPTIONS, uri), reverse: route)))
            #expect(reverse.isAsterisk && reverse.port == 7000, "\(uri): the route's path does not apply to the server as a whole")
        }
        let get = try #require(Self.forwarded(RequestClassifier.classify(Self.head(.GET, "http://127.0.0.1:9000"), reverse: route)))
        #expect(get.path == "/v2/")
        guard case .invalid = RequestClassifier.classify(Self.head(.GET, "*"), reverse: route) else {
            Issue.record("GET * at a reverse listener was not refused")
            return
        }
    }
}
