/// Foundation's `CharacterSet.whitespaces`, without Foundation: tab, space and the Unicode space separators as
/// CoreFoundation lists them (U+00A0, U+1680, U+2000…U+200B, U+202F, U+205F, U+3000; U+200B included, U+180E not).
public enum Whitespace {
    public static func contains(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: true
        default: false
        }
    }
}

extension StringProtocol {
    /// The string without leading and trailing `Whitespace` scalars: what `trimmingCharacters(in: .whitespaces)`
    /// returns (by Unicode scalar, so a space before a combining mark goes and the mark stays). For HTTP's optional
    /// whitespace alone (spaces and tabs, read as bytes) use `trimmingSpaces()`.
    public func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !Whitespace.contains($0) }),
              let last = scalars.lastIndex(where: { !Whitespace.contains($0) }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
