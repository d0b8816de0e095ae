/// Text from the traffic (header values, URLs, a WebSocket close reason, a server's `Location`) made safe to print on
/// a terminal. Control characters are written as visible escapes: C0 and DEL as `\x1B`, C1 (U+0080–U+009F) as
/// `\u009B`. An upstream then cannot move the cursor, retitle the window or clear the screen of the developer
/// watching hookproxy's console; the files (HAR, JSONL) keep the exact bytes, JSON-escaped.
///
/// Runs on the console's writer thread. The common text, with no such character, is returned as it came.
enum TerminalSafe {
    static func text(_ text: String) -> String {
        guard needsEscaping(text) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || value == 0x7F {
                out.append(contentsOf: "\\x".unicodeScalars)
                appendHex(value, digits: 2, to: &out)
            } else if (0x80...0x9F).contains(value) {
                out.append(contentsOf: "\\u".unicodeScalars)
                appendHex(value, digits: 4, to: &out)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// True when `text` holds a C0 control, DEL or a C1 control (UTF-8 `C2 80`–`C2 9F`).
    private static func needsEscaping(_ text: String) -> Bool {
        var afterC2 = false
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F || (afterC2 && byte <= 0x9F) { return true }
            afterC2 = byte == 0xC2
        }
        return false
    }

    private static func appendHex(_ value: UInt32, digits: Int, to out: inout String.UnicodeScalarView) {
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            out.append(hex[Int((value >> UInt32(shift)) & 0xF)])
        }
    }
}
