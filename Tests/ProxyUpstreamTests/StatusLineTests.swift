import ProxyModel
import Testing
@testable import ProxyUpstream

/// The byte-level reading of common status lines must give exactly what the general reader gives.
struct StatusLineTests {
    static let lines = [
        "HTTP/1.1 200 OK", "HTTP/1.1 200", "HTTP/1.1 200 ", "HTTP/1.1 200  OK", "HTTP/1.1 404 Not  Found ",
        "HTTP/1.0 301 Moved Permanently", "HTTP/2 200", "HTTP/2 204 ", "HTTP/3 418 I'm a teapot", "HTTP/1.1 999 Odd",
        "HTTP/1.1 000 Zero", "HTTP/1.1 20 Short", "HTTP/1.1 2000 Long", "HTTP/1.1  200 OK", "HTTP/1.1 2x0 OK",
        "HTTP/1.2 200 OK", "HTTP/1.1-200 OK", "HTTP/2 -1", "HTTP/2  200", "HTTP/1.1 200 Καλά", "HTTP/1.1 200\tOK",
        "HTTP/1.1 200 \u{301}OK", "HTTP/2 200 \u{301}", "HTTP/1.0 404 \u{20DD}", "HTTP/1.1  200 \u{301}OK",
    ]

    @Test(arguments: lines)
    func plainReadingAgreesWithTheGeneralOne(_ line: String) {
        let general = ResponseHeadParser.statusLine(line)
        var text = line
        let plain = text.withUTF8 { ResponseHeadParser.plainStatusLine(UnsafeRawBufferPointer($0)) }
        if let plain {
            #expect(plain == general)
        }
    }

    /// A space followed by a combining mark is still a space (a reason may hold any obs-text): both readings split
    /// at bytes. (A review found the Character-based reading gave status 0 here, and so a 502.)
    @Test func aCombiningMarkAfterASpaceDoesNotHideIt() {
        for line in ["HTTP/1.1 200 \u{301}OK", "HTTP/1.1  200 \u{301}OK"] {
            let head = ResponseHeadParser.statusLine(line)
            #expect(head.status == 200)
            #expect(head.reason == "\u{301}OK")
        }
    }

    @Test func commonLinesTakeThePlainPath() {
        for line in ["HTTP/1.1 200 OK", "HTTP/1.0 304 Not Modified", "HTTP/2 200", "HTTP/1.1 204 "] {
            var text = line
            #expect(text.withUTF8 { ResponseHeadParser.plainStatusLine(UnsafeRawBufferPointer($0)) } != nil, "\(line)")
        }
    }
}
