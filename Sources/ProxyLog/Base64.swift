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

    /// Characters `count` bytes take.
    static func length(of count: Int) -> Int { (count + 2) / 3 * 4 }

    static func encode(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        return bytes.withUnsafeBufferPointer { input in
            String(unsafeUninitializedCapacity: length(of: input.count)) { output in
                encode(input, into: UnsafeMutableRawPointer(output.baseAddress!))
            }
        }
    }

    /// Writes the base64 of `input` at `output`, which has room for `length(of: input.count)` bytes; returns that.
    @discardableResult
    static func encode(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableRawPointer) -> Int {
        let count = input.count
        return pairs.withUnsafeBufferPointer { pairs in
            var from = 0
            var to = 0
            while from + 3 <= count {
                let group = Int(input[from]) << 16 | Int(input[from + 1]) << 8 | Int(input[from + 2])
                output.storeBytes(of: pairs[group >> 12], toByteOffset: to, as: UInt16.self)
                output.storeBytes(of: pairs[group & 4095], toByteOffset: to + 2, as: UInt16.self)
                from += 3
                to += 4
            }
            let rest = count - from
            if rest > 0 {
                let group = Int(input[from]) << 16 | (rest == 2 ? Int(input[from + 1]) << 8 : 0)
                output.storeBytes(of: alphabet[group >> 18], toByteOffset: to, as: UInt8.self)
                output.storeBytes(of: alphabet[group >> 12 & 63], toByteOffset: to + 1, as: UInt8.self)
                output.storeBytes(of: rest == 2 ? alphabet[group >> 6 & 63] : UInt8(ascii: "="), toByteOffset: to + 2,
                                  as: UInt8.self)
                output.storeBytes(of: UInt8(ascii: "="), toByteOffset: to + 3, as: UInt8.self)
                to += 4
            }
            return to
        }
    }
}
