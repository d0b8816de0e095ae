/// The parameters of an HTTP authentication challenge or answer (RFC 9110 §11.2): `name=value` and
/// `name="quoted, \"value\""` pairs, spaces allowed around `=`, names lower-cased. Shared by the WebSocket
/// handshake's challenge answers and the test servers that check them.
public enum AuthParameters {
    /// `name=value, name="quoted, \"value\""` pairs; names lower-cased.
    public static func parse(_ text: Substring) -> [String: String] {
        var result: [String: String] = [:]
        var index = text.startIndex
        while index < text.endIndex {
            while index < text.endIndex, text[index] == " " || text[index] == "," { index = text.index(after: index) }
            guard let equals = text[index...].firstIndex(of: "=") else { break }
            let name = text[index..<equals].trimmingWhitespace().lowercased()
            index = text.index(after: equals)
            while index < text.endIndex, text[index] == " " { index = text.index(after: index) }
            var value = ""
            if index < text.endIndex, text[index] == "\"" {
                index = text.index(after: index)
                while index < text.endIndex, text[index] != "\"" {
                    if text[index] == "\\" {
                        index = text.index(after: index)
                        if index == text.endIndex { break }
                    }
                    value.append(text[index])
                    index = text.index(after: index)
                }
                if index < text.endIndex { index = text.index(after: index) }
            } else {
                let end = text[index...].firstIndex(of: ",") ?? text.endIndex
                value = text[index..<end].trimmingWhitespace()
                index = end
            }
            result[name] = value
        }
        return result
    }
}
