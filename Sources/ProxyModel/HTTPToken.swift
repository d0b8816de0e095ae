/// RFC 9110 §5.6.2 `token`: the characters of a method or a field name. One bit per byte, so checking the names of
/// every forwarded header costs a shift and a mask each.
public enum HTTPToken {
    /// Bits 0–63 and 64–127 of the token characters: `!#$%&'*+-.` and digits; `^_`|~` and letters. Literals, so
    /// reading them is a load (a computed `static let` goes through its lazy initializer's check on every byte).
    /// `HTTPTokenTests` checks them against the RFC's list.
    @usableFromInline static let low: UInt64 = 0x03FF_6CFA_0000_0000
    @usableFromInline static let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE

    @inlinable
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        byte < 64 ? low & (1 << UInt64(byte)) != 0 : byte < 128 && high & (1 << UInt64(byte - 64)) != 0
    }

    /// A non-empty run of token characters. (A native string's bytes are read as a buffer: iterating its UTF-8 view
    /// costs several times as much per byte, and every forwarded field name goes through here.)
    @inlinable
    public static func isToken(_ text: String) -> Bool {
        guard !text.isEmpty else { return false }
        if let result = text.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(isTokenByte) }) { return result }
        return text.utf8.allSatisfy(isTokenByte)
    }

    /// Whether a field value holds CR, LF or NUL, which would end or break the field where it is written.
    @inlinable
    public static func breaksFieldValue(_ value: String) -> Bool {
        let breaks = { (byte: UInt8) in byte < 0x0E && (byte == 0x0D || byte == 0x0A || byte == 0x00) }
        if let result = value.utf8.withContiguousStorageIfAvailable({ $0.contains(where: breaks) }) { return result }
        return value.utf8.contains(where: breaks)
    }

    /// Whether a field value holds a control character other than HTAB (RFC 9110 §5.5: a value is visible
    /// characters, obs-text, SP and HTAB), DEL included: a superset of `breaksFieldValue`. NIO's response encoder
    /// refuses such a value, and refusing it closed the client's connection with no answer.
    @inlinable
    public static func hasControlCharacter(_ value: String) -> Bool {
        let control = { (byte: UInt8) in (byte < 0x20 && byte != 0x09) || byte == 0x7F }
        if let result = value.utf8.withContiguousStorageIfAvailable({ $0.contains(where: control) }) { return result }
        return value.utf8.contains(where: control)
    }
}
