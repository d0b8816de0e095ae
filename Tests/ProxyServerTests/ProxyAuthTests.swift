import Foundation
import Testing
@testable import ProxyServer

/// `--proxy-auth`: the Basic check compares in constant time (issue 11, 18a) and still decides as before.
@Suite struct ProxyAuthTests {
    let credentials = ProxyCredentials(user: "alice", password: "s3cret")

    func basic(_ text: String) -> String { "Basic " + Data(text.utf8).base64EncodedString() }

    @Test func acceptsTheRightCredentials() {
        #expect(ProxyAuth.matches(basic("alice:s3cret"), credentials))
        #expect(ProxyAuth.matches("basic  " + Data("alice:s3cret".utf8).base64EncodedString(), credentials))
    }

    @Test func rejectsWrongCredentialsOfEqualLength() {
        #expect(!ProxyAuth.matches(basic("alice:s3creT"), credentials))
        #expect(!ProxyAuth.matches(basic("Alice:s3cret"), credentials))
        #expect(!ProxyAuth.matches(basic("alice-s3cret"), credentials))
    }

    @Test func rejectsWrongCredentialsOfOtherLengths() {
        #expect(!ProxyAuth.matches(basic("alice:s3cre"), credentials))
        #expect(!ProxyAuth.matches(basic("alice:s3cret!"), credentials))
        #expect(!ProxyAuth.matches(basic(""), credentials))
        #expect(!ProxyAuth.matches(basic("alice:s3cret" + String(repeating: "x", count: 300)), credentials))
        #expect(!ProxyAuth.matches("Bearer " + Data("alice:s3cret".utf8).base64EncodedString(), credentials))
        #expect(!ProxyAuth.matches("Basic !!!", credentials))
    }

    @Test func constantTimeEqualsComparesWholeArrays() {
        #expect(ProxyAuth.constantTimeEquals([], []))
        #expect(ProxyAuth.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!ProxyAuth.constantTimeEquals([1, 2, 4], [1, 2, 3]))
        #expect(!ProxyAuth.constantTimeEquals([1, 2], [1, 2, 3]))
        #expect(!ProxyAuth.constantTimeEquals([1, 2, 3, 0], [1, 2, 3]))
        // 256 extra bytes: a length difference that wraps to 0 in a byte must still differ.
        #expect(!ProxyAuth.constantTimeEquals([1, 2, 3] + [UInt8](repeating: 0, count: 256), [1, 2, 3]))
        #expect(!ProxyAuth.constantTimeEquals([], [0]))
    }
}
