/// Bytes as hex text, without `String(format:)`.
public enum HexText {
    /// `0A:FF:…`: two upper-case digits a byte, colon-separated (a certificate fingerprint, as `%02X` wrote it).
    public static func colonSeparated<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            if !text.isEmpty { text.append(UInt8(ascii: ":")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
