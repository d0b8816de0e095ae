/// A body as a log shows it: its text, or its bytes shown as base64. `JSONWriter` encodes the bytes straight into the
/// line it writes; the base64 `String` is built only when asked for (`string`, `Encodable`).
public enum LoggedText: Sendable, Hashable, Encodable {
    case text(String)
    case base64([UInt8])

    public var string: String {
        switch self {
        case .text(let text): text
        case .base64(let bytes): Base64.encode(bytes)
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(string)
    }
}
