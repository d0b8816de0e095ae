import ProxyModel
import Testing

/// `ProxyURL.removingDotSegments`: RFC 3986 §5.2.4 on absolute paths (what keeps a reverse route's path prefix from
/// being climbed out of), with `%2E` read as `.`.
struct DotSegmentTests {
    @Test(arguments: [
        ("/", "/"), ("/users", "/users"), ("/a/b/", "/a/b/"), ("/a//b", "/a//b"),
        ("/a/./b", "/a/b"), ("/a/b/../c", "/a/c"), ("/../x", "/x"), ("/../../x/y", "/x/y"),
        ("/a/..", "/"), ("/a/b/..", "/a/"), ("/a/.", "/a/"), ("/.", "/"), ("/..", "/"),
        ("/%2e%2e/admin", "/admin"), ("/%2E./admin", "/admin"), ("/.%2E/x", "/x"), ("/a/%2e/b", "/a/b"),
        ("/.../x", "/.../x"), ("/..a/x", "/..a/x"), ("/a../x", "/a../x"), ("/%2e%2e%2e/x", "/%2e%2e%2e/x"),
        ("/%2f../x", "/%2f../x"), ("/%2", "/%2"), ("/file.txt", "/file.txt"), ("/a//../b", "/a/b"),
    ])
    func dotSegmentsGo(_ path: String, _ expected: String) {
        #expect(ProxyURL.removingDotSegments(path) == expected)
    }

    /// A `/` followed by a combining mark (U+0338) or a zero-width joiner is one Swift `Character`: split by
    /// characters, the `..` before it stayed, and `/v2/../\u{338}\u{600}/../secret` reached the origin, which climbed
    /// out of the prefix (a review's find, over HTTP/2, whose `:path` may carry such bytes).
    @Test(arguments: [
        ("/../\u{338}\u{600}/../secret.txt", "/secret.txt"), ("/../\u{200D}\u{600}/../secret.txt", "/secret.txt"),
        ("/../\u{338}admin", "/\u{338}admin"), ("/é/../x", "/x"), ("/a/\u{338}", "/a/\u{338}"),
    ])
    func slashesAreBytes(_ path: String, _ expected: String) {
        let removed = ProxyURL.removingDotSegments(path)
        #expect(Array(removed.utf8) == Array(expected.utf8), "\(Array(removed.utf8))")
    }

    /// Segments some origins read as dot segments and RFC 3986 does not: refused under a reverse route's prefix.
    @Test(arguments: [
        ("/..%2fsecret.txt", "..%2fsecret.txt"), ("/%2e%2e%2Fsecret", "%2e%2e%2Fsecret"), ("/a/..%5cb", "..%5cb"),
        ("/..\\secret", "..\\secret"), ("/..;/admin", "..;"), ("/.;x/y", ".;x"), ("/x%2F..", "x%2F.."),
        ("/..;jsessionid=1/admin", "..;jsessionid=1"),
    ])
    func ambiguousSegmentsAreFound(_ path: String, _ segment: String) {
        #expect(ProxyURL.ambiguousDotSegment(in: path) == segment)
    }

    @Test(arguments: ["/", "/users/42", "/projects/group%2Fproject", "/v1.2%2Fx", "/a;b/c", "/file.txt;v=2",
                      "/../x", "/%2e%2e/x", "/...%2fx", "/a\\b"])
    func plainSegmentsPass(_ path: String) {
        #expect(ProxyURL.ambiguousDotSegment(in: path) == nil)
    }
}
