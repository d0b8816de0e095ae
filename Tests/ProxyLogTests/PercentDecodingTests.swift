import Foundation
import Testing
@testable import ProxyLog

/// `Redactor.removingPercentEncoding` (the query names `--redact-query` compares) is Foundation's, without it.
struct PercentDecodingTests {
    @Test("decodes or refuses as Foundation's removingPercentEncoding", arguments: [
        "", "token", "a%20b", "%41%62", "%e9", "%C3%A9", "%C3", "%", "%4", "%zz", "%4g", "100%", "a%2Bb", "%25", "%2525",
        "%00", "%F0%9F%98%80", "%ED%A0%80", "%C0%80", "é%20", "a+b", "%%41", "%7E%7e",
    ])
    func sameAsFoundation(_ text: String) {
        #expect(Redactor.removingPercentEncoding(text) == text.removingPercentEncoding, "\(text)")
    }
}
