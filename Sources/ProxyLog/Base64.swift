/// Standard base64 (RFC 4648 §4, with `=` padding, no line breaks) of log bodies and WebSocket messages: the same
/// text as Foundation's `base64EncodedString()`, written straight into the string's storage three bytes (two table lookups) at a time
/// (Foundation's goes through `Data` and a generic encoder: the largest cost of a HAR record with a binary body).
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Every 12-bit value's two characters, as they lie in memory: two lookups per three input bytes, not four.
    private static let pairs: [UInt16] = (0..<4096).map { value in
        let two = [alphabet[value >> 6], alphabet[value & 63]]
        return two.withUnsafeBytes { $0.loadUnaligned(as: UInt16.self) }
    }

    static func encode(_ bytes: [UInt8]) -> String {
        let count = bytes.count
        guard count > 0 else { return "" }
        let length = (count + 2) / 3 * 4
        return bytes.withUnsafeBufferPointer { input in
            pairs.withUnsafeBufferPointer { pairs in
                String(unsafeUninitializedCapacity: length) { output in
                    let raw = UnsafeMutableRawPointer(output.baseAddress!)
                    var from = 0
                    var to = 0
                    while from + 3 <= count {
                        let group = Int(input[from]) << 16 | Int(input[from + 1]) << 8 | Int(input[from + 2])
                        raw.storeBytes(of: pairs[group >> 12], toByteOffset: to, as: UInt16.self)
                        raw.storeBytes(of: pairs[group & 4095], toByteOffset: to + 2, as: UInt16.self)
                        from += 3
                        to += 4
                    }
                    let rest = count - from
                    if rest > 0 {
                        let group = Int(input[from]) << 16 | (rest == 2 ? Int(input[from + 1]) << 8 : 0)
                        output[to] = alphabet[group >> 18]
                        output[to + 1] = alphabet[group >> 12 & 63]
                        output[to + 2] = rest == 2 ? alphabet[group >> 6 & 63] : UInt8(ascii: "=")
                        output[to + 3] = UInt8(ascii: "=")
                        to += 4
                    }
                    return to
                }
            }
        }
    }
}
