import FoundationEssentials
import ProxyModel

/// How a captured body is written to a log: as text when it is valid UTF-8 and textual, else as base64.
public struct BodyText: Sendable, Hashable {
    public enum Encoding: String, Sendable { case utf8, base64 }
    /// The text, or the bytes to show as base64 (encoded when written).
    public var logged: LoggedText
    public var encoding: Encoding
    /// The text as logged (base64 encoded here for a binary body).
    public var text: String { logged.string }

    /// Chooses the form for `bytes` with the message's `Content-Type` and `Content-Encoding` (nil when absent).
    /// Compressed bodies (any content coding but identity) and declared binary types are base64; declared textual
    /// types are text when valid UTF-8; an undeclared type is text when valid UTF-8 without control characters.
    /// A truncated body may end inside a UTF-8 sequence: those last bytes are dropped from the text form.
    public init(bytes: [UInt8], contentType: String?, contentEncoding: String? = nil, truncated: Bool = false) {
        let coding = contentEncoding?.trimmingSpaces().lowercased() ?? ""
        let kind = coding.isEmpty || coding == "identity" ? BodyText.kind(of: contentType) : .binary
        if kind != .binary, let text = BodyText.utf8(bytes, allowCutTail: truncated),
           kind == .textual || !BodyText.hasControlCharacters(text) {
            self.logged = .text(text)
            self.encoding = .utf8
        } else {
            self.logged = .base64(bytes)
            self.encoding = .base64
        }
    }

    /// The bytes back from a logged form.
    public var bytes: [UInt8]? {
        switch logged {
        case .text(let text): Array(text.utf8)
        case .base64(let bytes): bytes
        }
    }

    enum Kind { case textual, binary, unknown }

    static func kind(of contentType: String?) -> Kind {
        guard let contentType else { return .unknown }
        let mime = mediaType(contentType)
        if mime.isEmpty { return .unknown }
        // Byte comparisons: String's hasPrefix compares Characters (this runs for every logged body).
        let bytes = mime.utf8
        if bytes.starts(with: "text/".utf8) || bytes.suffix(5).elementsEqual("+json".utf8) || bytes.suffix(4).elementsEqual("+xml".utf8) {
            return .textual
        }
        if textualTypes.contains(mime) { return .textual }
        if binaryPrefixes.contains(where: { bytes.starts(with: $0.utf8) }) { return .binary }
        return binaryTypes.contains(mime) ? .binary : .unknown
    }

    /// The media type of a `Content-Type` value: before any `;`, without spaces, ASCII-lowercased.
    /// The usual value (one lowercase media type, nothing around it) comes back as it is, without a copy.
    static func mediaType(_ contentType: String) -> String {
        let bytes = contentType.utf8
        if !bytes.contains(where: { $0 == UInt8(ascii: ";") || $0 == 0x20 || $0 == 0x09 || ($0 >= 65 && $0 <= 90) }) {
            return contentType
        }
        let end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? contentType.endIndex
        return contentType[..<end].trimmingSpaces().asciiLowercased()
    }

    private static let textualTypes: Set<String> = [
        "application/json", "application/xml", "application/javascript", "application/ecmascript",
        "application/x-www-form-urlencoded", "application/graphql", "application/x-ndjson", "application/yaml",
        "application/x-yaml", "application/sql", "application/csp-report", "image/svg+xml",
    ]
    private static let binaryPrefixes = ["image/", "audio/", "video/", "font/", "model/"]
    private static let binaryTypes: Set<String> = [
        "application/octet-stream", "application/zip", "application/gzip", "application/x-gzip", "application/pdf",
        "application/x-protobuf", "application/protobuf", "application/grpc", "application/wasm",
        "application/x-tar", "application/msgpack", "application/cbor",
    ]

    static func utf8(_ bytes: [UInt8], allowCutTail: Bool) -> String? {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        guard allowCutTail else { return nil }
        for cut in 1...3 where bytes.count >= cut {
            if let text = String(validating: bytes.dropLast(cut), as: UTF8.self) { return text }
        }
        return nil
    }

    static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            (scalar.value < 0x20 && scalar != "\n" && scalar != "\r" && scalar != "\t") || scalar.value == 0x7F
        }
    }
}

extension FlowRecord {
    /// The logged form of the request body, or nil when none was captured.
    var requestBodyText: BodyText? {
        guard let body = requestBody, !(body.bytes.isEmpty && requestBodySize == 0 && !body.truncated) else { return nil }
        return BodyText(bytes: body.bytes, contentType: request.headers["Content-Type"],
                        contentEncoding: request.headers["Content-Encoding"], truncated: body.truncated)
    }

    /// The logged form of the response body, or nil when none was captured.
    var responseBodyText: BodyText? {
        guard let body = responseBody, !(body.bytes.isEmpty && responseBodySize == 0 && !body.truncated) else { return nil }
        return BodyText(bytes: body.bytes, contentType: response?.headers["Content-Type"],
                        contentEncoding: response?.headers["Content-Encoding"], truncated: body.truncated)
    }
}
