import Foundation
import ProxyModel
import Testing

/// `JSONCheck` says what `JSONSerialization.jsonObject(with:options: .fragmentsAllowed)` said, word for word, and
/// where: pinned against it over hand-made faults and random mutations of a HAR-like document.
struct JSONCheckTests {
    static func foundation(_ bytes: [UInt8]) -> String? {
        do {
            _ = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
            return nil
        } catch {
            return (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
        }
    }

    static let document = #"{"log":{"version":"1.2","entries":[{"startedDateTime":"2025-01-31T12:34:56.789Z","time":-1.5e3,"# +
        #""request":{"method":"GET","url":"http://a/é?x=\u00e9\ud83d\ude00","headers":[{"name":"A","value":"b\"\\\/\b\f\n\r\t"}]},"# +
        #""response":{"status":200,"ok":true,"no":false,"none":null,"n":[0,-0,0.5,1E+2,3e-1,12345678901234567890]}}]}}"# + "\n"

    @Test("hand-made faults", arguments: [
        "{\"log\":{\"entries\":[\n{\"request\":{},,\n]}}", "{\"log\":{\"entries\":[\n", "{\"a\":tru}", "{\"a\":\"\\q\"}",
        "{\"a\":01}", "{\"a\":\"x\u{1}\"}", "{\"a\":\"\\ud800\"}", "{\"a\":1e999}", "[1] x", "{\"a\" 1}", "{\"é\":é}",
        String(repeating: "[", count: 600), "\u{FEFF}{\"a\":x}", "{\"a\":\"\\uZZZZ\"}", "{\"a\":-}", "{\"a\":1.}", "{'a':1}",
        "{\"a\":1,}", "[1,]", "nul", "\"abc", "{\"a\":\"\\udc00\"}", "", "   ", "1", "-", "-0", "00", "1.5e", "1e+", "truex",
        "[tru", "[nulx]", "{\"a\":\"\\ud800\\u0041\"}", "{\"a\":\"\\ud800x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\", "{\"a\"",
        "{\"a\":", "{\"a\":1", "{\"a\":1 x}", "[1 2]", "{1:2}", "[\"\\é\"]", "{\"a\":-01}", "{\"a\":1.2.3}", "{\"a\":1e5e5}",
        "{\"a\":+1}", "{\"a\":.5}", "\t\r\n{}\n", "18446744073709551616", "-9223372036854775809", "1e308", "1e309",
    ])
    func faults(_ text: String) {
        let bytes = Array(text.utf8)
        #expect(JSONCheck(bytes).problem == Self.foundation(bytes), "\(text.prefix(60))")
    }

    @Test("bytes that are not UTF-8, and UTF-16 and UTF-32 documents")
    func encodings() {
        let cases: [[UInt8]] = [
            Array("[\"a".utf8) + [0xFF] + Array("\"]".utf8), Array("[\"ab\\n".utf8) + [0xC3] + Array("\"]".utf8),
            Array("[".utf8) + [0xC3, 0xA9] + Array("]".utf8), Array("{\"a\":\"".utf8) + [0xE2, 0x82] + Array("\\n\"}".utf8),
            [0xEF, 0xBB, 0xBF] + Array("{\"a\":1}".utf8), [0xEF, 0xBB, 0xBF] + Array("{\"a\":x}".utf8),
            [0xFF, 0xFE] + Array("{\"a\":1}".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
            [0xFE, 0xFF] + Array("[1,x]".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] },
            Array("[1,x]".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
            Array("[1]".unicodeScalars).flatMap { [UInt8($0.value & 0xFF), 0, 0, 0] },
            [0xFF, 0xFE, 0x00, 0xD8], [0x00],
        ]
        for bytes in cases {
            #expect(JSONCheck(bytes).problem == Self.foundation(bytes), "\(bytes.prefix(24))")
        }
    }

    @Test("random mutations of a HAR-like document")
    func mutations() {
        let original = Array(Self.document.utf8)
        #expect(JSONCheck(original).problem == nil)
        let alphabet = Array("{}[],:\"\\ -+.0123456789eEtfnul\u{1}\nxé".utf8) + [0xFF, 0xC3]
        var differing: [String] = []
        for _ in 0..<20_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...3) {
                let at = Int.random(in: 0..<bytes.count)
                switch Int.random(in: 0..<3) {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(alphabet.randomElement()!, at: at)
                default: bytes[at] = alphabet.randomElement()!
                }
            }
            if Int.random(in: 0..<4) == 0 { bytes.removeLast(Int.random(in: 0..<bytes.count)) }
            let mine = JSONCheck(bytes).problem, theirs = Self.foundation(bytes)
            if mine != theirs { differing.append("\(String(decoding: bytes, as: UTF8.self)): \(mine ?? "ok") / \(theirs ?? "ok")") }
        }
        #expect(differing.isEmpty, "\(differing.count): \(differing.prefix(5))")
    }

    @Test("the keys of a top-level object, unescaped")
    func keys() {
        #expect(JSONCheck(Array(#"{"started\u0044ateTime":1,"a":{"b":2},"c":[{"d":3}]}"#.utf8)).topLevelKeys
                == ["startedDateTime", "a", "c"])
        #expect(JSONCheck(Array(#"[{"a":1}]"#.utf8)).topLevelKeys.isEmpty)
    }
}
