import ProxyModel
import Testing

/// `ProxyURL.description` and `authority` as text, written into one buffer (`URLText`): every shape a URL takes.
struct ProxyURLTextTests {
    @Test("parsed URLs give back their text", arguments: [
        "http://example.test/", "https://example.test/a/b?x=1&y=%20", "http://example.test:8080/p",
        "https://example.test:443/", "http://[::1]:9000/v6?q", "https://[2001:db8::1]/", "http://127.0.0.1:1/é?ü=ß",
        "http://a.test/" + String(repeating: "long/", count: 400),
    ])
    func roundTrip(_ text: String) throws {
        let url = try #require(ProxyURL(string: text))
        let expected = text.replacingOccurrences(of: "https://example.test:443/", with: "https://example.test/")
        #expect(url.description == expected)
        #expect(ProxyURL(string: url.description) == url)
    }

    @Test("an origin-form target's fragment is dropped (libcurl never sends it): rules and logs see what leaves")
    func originFormFragmentDropped() {
        #expect(ProxyURL.splitTarget("/a/b#frag") == ("/a/b", nil))
        #expect(ProxyURL.splitTarget("/a?x=1#frag?y") == ("/a", "x=1"))
        #expect(ProxyURL.splitTarget("#only") == ("/", nil))
        #expect(ProxyURL(string: "http://h.test/p?q#f")?.description == "http://h.test/p?q")
    }

    @Test func authorityShowsThePortOnlyWhenNotTheDefaultAndBracketsIPv6() {
        #expect(ProxyURL(scheme: "http", host: "h.test", port: 80, path: "/").authority == "h.test")
        #expect(ProxyURL(scheme: "http", host: "h.test", port: 8080, path: "/").authority == "h.test:8080")
        #expect(ProxyURL(scheme: "https", host: "::1", port: 443, path: "/").authority == "[::1]")
        #expect(ProxyURL(scheme: "https", host: "::1", port: 8443, path: "/").authority == "[::1]:8443")
        #expect(ProxyURL(scheme: "http", host: "h.test", port: 65535, path: "/", query: "").description == "http://h.test:65535/?")
    }

    @Test(arguments: [0, 1, 9, 10, 99, 100, 8080, 65535, 123_456_789, -1])
    func portDigits(_ port: Int) {
        #expect(ProxyURL(scheme: "http", host: "h.test", port: port, path: "/").description == "http://h.test:\(port)/")
        #expect(ProxyURL(scheme: "http", host: "::1", port: port, path: "/").authority == "[::1]:\(port)")
    }

    @Test func theAsteriskFormHasAnEmptyPath() {
        #expect(ProxyURL.asterisk(scheme: "http", host: "h.test", port: 81).description == "http://h.test:81")
    }
}
