import Foundation
import ProxyModel
import Testing

/// `trimmingWhitespace` is Foundation's `trimmingCharacters(in: .whitespaces)` without Foundation: pinned against it.
struct TrimmingWhitespaceTests {
    @Test("Whitespace holds exactly the scalars of CharacterSet.whitespaces")
    func sameSet() {
        var differing: [UInt32] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            if Whitespace.contains(scalar) != CharacterSet.whitespaces.contains(scalar) { differing.append(value) }
        }
        #expect(differing.isEmpty, "\(differing.map { String($0, radix: 16) })")
    }

    @Test("trims as Foundation does", arguments: [
        "", "  ", "\t a b \t", "x", " \u{A0}v\u{A0} ", "\r\nv\r\n", " \u{301}abc ", "\u{A0}x\u{200B}",
        "\u{1F600} a \u{1F600}", "\t\u{3000}a\u{180E}", "e\u{301} ", "\u{2000}\u{200A}é\u{202F}\u{205F}", "a\u{85}",
    ])
    func trims(_ input: String) {
        let expected = input.trimmingCharacters(in: .whitespaces)
        #expect(Array(input.trimmingWhitespace().unicodeScalars) == Array(expected.unicodeScalars))
        #expect(Array(input.dropFirst(0).trimmingWhitespace().unicodeScalars) == Array(expected.unicodeScalars))
    }
}
