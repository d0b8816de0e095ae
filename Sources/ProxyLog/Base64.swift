/// Standard base64 (RFC 4648 §4, with `=` padding, no line breaks) of log bodies and WebSocket messages: the same
/// text as Foundation's `base64EncodedString()`, written straight into the string's storage three bytes at a time
/// (Foundation's goes through `Data` and a generic encoder: the largest cost of a HAR record with a binary body).
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        let count = bytes.count
        guard count > 0 else { return "" }
        let length = (count + 2) / 3 * 4
        return bytes.withUnsafeBufferPointer { input in
            alphabet.withUnsafeBufferPointer { table in
                String(unsafeUninitializedCapacity: length) { output in
                    var from = 0
                    var to = 0
                    while from + 3 <= count {
                        let group = UInt32(input[from]) << 16 | UInt32(input[from + 1]) << 8 | UInt32(input[from + 2])
                        output[to] = table[Int(group >> 18)]
                        output[to + 1] = table[Int(group >> 12 & 63)]
                        output[to + 2] = table[Int(group >> 6 & 63)]
                        output[to + 3] = table[Int(group & 63)]
                        from += 3
                        to += 4
                    }
                    let rest = count - from
                    if rest > 0 {
                        let group = UInt32(input[from]) << 16 | (rest == 2 ? UInt32(input[from + 1]) << 8 : 0)
                        output[to] = table[Int(group >> 18)]
                        output[to + 1] = table[Int(group >> 12 & 63)]
                        output[to + 2] = rest == 2 ? table[Int(group >> 6 & 63)] : UInt8(ascii: "=")
                        output[to + 3] = UInt8(ascii: "=")
                        to += 4
                    }
                    return to
                }
            }
        }
    }
}
