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
}
