import ProxyModel
import Testing

/// `trimmingSpaces`: HTTP's optional whitespace (spaces, tabs) off both ends, nothing else.
struct TrimmingSpacesTests {
    @Test("spaces and tabs go from both ends; inner ones, other whitespace and non-ASCII stay",
          arguments: [("", ""), ("   ", ""), ("\t a b \t", "a b"), ("x", "x"), (" \u{A0}v\u{A0} ", "\u{A0}v\u{A0}"),
                      ("\r\nv\r\n", "\r\nv\r\n"), ("  héllo wörld 😀\t", "héllo wörld 😀"), ("a\t\tb", "a\t\tb")])
    func trims(_ input: String, _ expected: String) {
        #expect(input.trimmingSpaces() == expected)
        #expect(input[...].trimmingSpaces() == expected, "a Substring as well")
    }
}
