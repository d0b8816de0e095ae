import Foundation
import ProxyModel
import Testing

/// `PathText` spells paths as NSString's `appendingPathComponent` / `deletingLastPathComponent` did (messages print
/// them): the first pinned against NSString, the second against what it answered before (it crashed on some).
struct PathTextTests {
    @Test("appending: as NSString's appendingPathComponent")
    func appending() {
        let directories = ["", "/", "//", "a", "a/", "a//", "/a", "/a/", "//a//b//", "a/b", "./a", "~", "~/x", "/a/b/../c",
                           ".", "..", "/tmp//x/", "é/", "/root/.hookproxy"]
        for directory in directories {
            for name in ["hookproxy-ca.pem", "", "/x", "x/", ".hookproxy", "rules.yaml"] {
                #expect(PathText.appending(name, to: directory) == (directory as NSString).appendingPathComponent(name),
                        "'\(directory)' + '\(name)'")
            }
        }
    }

    @Test("deletingLastComponent: what deletingLastPathComponent answered", arguments: [
        ("", ""), ("/", "/"), ("/a", "/"), ("/a/", "/"), ("a/b", "a"), ("a//b", "a"), ("//a//b//", "/a"), ("a/b/", "a"),
        ("/a/b/../c", "/a/b/.."), ("..", ""), ("a/./", "a"), ("/tmp//x/", "/tmp"), ("../x", ".."), ("a b/c", "a b"),
        ("é/x", "é"), ("x/é", "x"), ("/é", "/"), ("ab", ""), ("a.yaml", ""), ("./a", "."), ("//a", "/"), ("///a", "/"),
        ("/a//", "/"), ("//a/b", "/a"), ("//a/", "/"), ("/./", "/"), ("./.", "."), ("ab/", ""), ("ab//", ""), ("~/x", "~"),
        ("x/~", "x"), ("/tmp/rules/r", "/tmp/rules"),
    ])
    func deletingLastComponent(_ path: String, _ expected: String) {
        #expect(PathText.deletingLastComponent(path) == expected)
    }

    /// Foundation's crashed (SIGILL) on these: a one-character last component without a slash before it.
    @Test("deletingLastComponent: a one-character name", arguments: [("a", ""), ("a/", ""), (".", ""), ("./", ""),
                                                                      ("~", ""), ("a//", "")])
    func oneCharacter(_ path: String, _ expected: String) {
        #expect(PathText.deletingLastComponent(path) == expected)
    }

    @Test("expandingTilde: as NSString's expandingTildeInPath for the current user")
    func expandingTilde() {
        for path in ["~", "~/", "~/rules.yaml", "~/a/b", "/abs/~/x", "a/~", "~user-not-expanded-here/x"] where !path.hasPrefix("~u") {
            #expect(PathText.expandingTilde(path) == (path as NSString).expandingTildeInPath, "\(path)")
        }
    }

    @Test("lexicallyNormal: as NSString's standardizingPath for absolute paths without symbolic links")
    func lexicallyNormal() {
        for path in ["/", "/a", "/a/", "/a//b", "/a/./b", "/a/b/..", "/a/b/../c", "/a/../../b", "/..", "/./", "/a/b/../../..",
                     "/nonexistent-hookproxy/x/./y/../z.yaml"] {
            #expect(PathText.lexicallyNormal(path) == (path as NSString).standardizingPath, "\(path)")
        }
    }
}
