import ProxyModel
import Testing

/// `caseInsensitiveEquals`: ASCII letters compare without case, every other byte exactly (field names).
struct CaseInsensitiveEqualsTests {
    @Test("letters fold; brackets, @ and `, digits and non-ASCII bytes do not",
          arguments: [("Content-Type", "content-type", true), ("ETAG", "etag", true), ("[", "{", false), ("@", "`", false),
                      ("X-1", "x-1", true), ("X-1", "x-2", false), ("É", "é", false), ("é", "é", true), ("a", "ab", false),
                      ("", "", true), ("Host", "Hosu", false), ("^", "~", false)])
    func compares(_ a: String, _ b: String, _ equal: Bool) {
        #expect(a.caseInsensitiveEquals(b) == equal)
        #expect(b.caseInsensitiveEquals(a) == equal)
    }
}
