import FoundationEssentials
import ProxyModel

/// Decides what of an exchange may be written to a log: header values that carry secrets, query parameters the user
/// named, and the values hookproxy itself added. A value type, usable from any thread; the writers apply it on their
/// own threads, never on the event loop.
public struct Redactor: Sendable, Hashable {
    /// What a hidden value reads in every output.
    public static let mask = "<redacted>"
    /// Header names whose values are secrets unless `logSecrets` (compared case-insensitively).
    public static let secretHeaders = ["Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie"]

    /// Header names whose values are URLs: their userinfo is masked and `--redact-query` applies to them.
    public static let urlHeaders = ["Location", "Content-Location", "Referer"]
    /// The two lists as sets looked up by length: every logged header is checked against both.
    private static let secretHeaderSet = HeaderNameSet(secretHeaders)
    private static let urlHeaderSet = HeaderNameSet(urlHeaders)

    /// `--log-secrets`: keep `secretHeaders` values and URL userinfo. `FlowRecord.secretValues` stay hidden anyway.
    public var logSecrets: Bool
    /// `--redact-query NAME`: query parameters whose values are hidden in every URL (names compared case-insensitively).
    public var redactedQueryNames: Set<String>

    public init(logSecrets: Bool = false, redactQuery: [String] = []) {
        self.logSecrets = logSecrets
        self.redactedQueryNames = Set(redactQuery.map { $0.lowercased() })
    }

    /// The record as it may be logged: every rule of this type applied to headers, URLs, bodies, events and error.
    /// The result's `secretValues` is empty.
    ///
    /// Secrets are masked by position, never as a substring of something longer: a secret value is hidden where it
    /// is a whole header value, a whole word (of a header value, a body, an event or the error) or a URL's userinfo.
    /// So a one-letter password leaves `http://` alone, and the credential hookproxy sends is still never shown.
    public func redact(_ flow: FlowRecord) -> FlowRecord {
        let secrets = Redactor.ordered(flow.secretValues)
        var out = flow
        out.url = url(flow.url, secrets: secrets)
        out.upstreamURL = flow.upstreamURL.map { url($0, secrets: secrets) }
        out.request.headers = headers(flow.request.headers, secrets: secrets)
        if let query = flow.request.url.query { out.request.url.query = self.query(query) }
        out.response?.headers = headers(flow.response?.headers ?? [], secrets: secrets)
        out.responseTrailers = flow.responseTrailers.map { headers($0, secrets: secrets) }
        out.requestBody = flow.requestBody.map { body($0, secrets: secrets) }
        out.responseBody = flow.responseBody.map { body($0, secrets: secrets) }
        out.events = flow.events.map {
            HookEvent(hook: $0.hook, action: text($0.action, secrets: secrets), detail: text($0.detail, secrets: secrets),
                      chain: $0.chain)
        }
        out.error = flow.error.map { text($0, secrets: secrets) }
        out.client = text(flow.client, secrets: secrets)
        out.secretValues = []
        return out
    }

    /// Header values with `secretHeaders` masked (unless `logSecrets`), URL headers (`urlHeaders`) redacted as URLs,
    /// and secret values masked where they are the whole value or a word of it.
    public func headers(_ fields: HeaderFields, secrets: [String] = []) -> HeaderFields {
        let secrets = Redactor.ordered(secrets)
        // The common record (no secrets of its own, no secret or URL header): nothing to change, nothing to copy.
        if secrets.isEmpty, !fields.contains(where: { field in
            (!logSecrets && Redactor.secretHeaderSet.contains(field.name)) || Redactor.urlHeaderSet.contains(field.name)
        }) {
            return fields
        }
        return HeaderFields(fields.map { field in
            if !logSecrets, Redactor.secretHeaderSet.contains(field.name) {
                return HeaderField(name: field.name, value: Redactor.mask)
            }
            // (Foundation's trim, as before: it also drops non-breaking spaces around a value. Only with secrets.)
            if !secrets.isEmpty, secrets.contains(field.value.trimmingWhitespace()) {
                return HeaderField(name: field.name, value: Redactor.mask)
            }
            if Redactor.urlHeaderSet.contains(field.name) {
                return HeaderField(name: field.name, value: url(field.value, secrets: secrets))
            }
            return HeaderField(name: field.name, value: Redactor.maskWords(secrets, in: field.value))
        })
    }

    /// A URL string with named query parameters masked and its userinfo masked: the password of `user:password@`,
    /// the whole of `token@` (unless `logSecrets`; a userinfo part that is one of `secrets` always). Nothing else
    /// of the URL is touched; text that is not a URL comes back unchanged.
    public func url(_ text: String, secrets: [String] = []) -> String {
        // The common URL (no `@`, no query parameter to hide) has nothing to redact: no scan, no copy.
        if redactedQueryNames.isEmpty, !Redactor.containsByte(UInt8(ascii: "@"), in: text) { return text }
        // Scanned as bytes: every separator is ASCII, so its byte index is a valid String index (a log record has
        // two or more URLs, and Foundation's `range(of:)` and Character iteration were most of a record's cost).
        var result = text
        if let schemeEnd = Redactor.schemeSeparator(in: Substring(result))?.upperBound {
            let rest = result.utf8[schemeEnd...]
            let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
                ?? rest.endIndex
            let authority = result.utf8[schemeEnd..<authorityEnd]
            if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
                let userinfo = authority[..<at]
                let hidden = userinfo.firstIndex(of: UInt8(ascii: ":")).map { userinfo.index(after: $0)..<at }
                    ?? userinfo.startIndex..<at
                if !result[hidden].isEmpty, !logSecrets || secrets.contains(String(result[hidden])) {
                    result.replaceSubrange(hidden, with: Redactor.mask)
                }
            }
        }
        if !redactedQueryNames.isEmpty, let question = result.utf8.firstIndex(of: UInt8(ascii: "?")) {
            let queryStart = result.utf8.index(after: question)
            let queryEnd = result.utf8[queryStart...].firstIndex(of: UInt8(ascii: "#")) ?? result.endIndex
            let redacted = query(String(result[queryStart..<queryEnd]))
            result.replaceSubrange(queryStart..<queryEnd, with: redacted)
        }
        return result
    }

    /// Whether `byte` occurs in `text`'s UTF-8.
    static func containsByte(_ byte: UInt8, in text: String) -> Bool {
        var text = text  // (`withUTF8` makes a foreign string native: on Linux every string already is)
        return text.withUTF8 { $0.contains(byte) }
    }

    /// The range of the first `://` in `text`, found over its UTF-8 bytes (most texts have none at all).
    static func schemeSeparator(in text: Substring) -> Range<String.Index>? {
        var contiguous = text
        let found = contiguous.withUTF8 { bytes -> Int? in
            var offset = 0
            while offset + 2 < bytes.count {
                if bytes[offset] == UInt8(ascii: ":"), bytes[offset + 1] == UInt8(ascii: "/"),
                   bytes[offset + 2] == UInt8(ascii: "/") { return offset }
                offset += 1
            }
            return nil
        }
        guard let found else { return nil }
        let colon = text.utf8.index(text.utf8.startIndex, offsetBy: found)
        return colon..<text.utf8.index(colon, offsetBy: 3)
    }

    /// A query string (without `?`) with the values of named parameters masked.
    public func query(_ query: String, secrets: [String] = []) -> String {
        guard !redactedQueryNames.isEmpty else { return query }
        let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let decoded = Redactor.removingPercentEncoding(String(name).replacing("+", with: " ")) ?? String(name)
            return isRedactedQueryName(decoded) ? "\(name)=\(Redactor.mask)" : String(pair)
        }
        return parts.joined(separator: "&")
    }

    /// Foundation's `removingPercentEncoding`: every `%XX` decoded; nil when a `%` is not followed by two hex digits
    /// or the bytes decoded are not UTF-8.
    static func removingPercentEncoding(_ text: String) -> String? {
        guard Redactor.containsByte(UInt8(ascii: "%"), in: text) else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = rest.popFirst().flatMap(hexValue), let low = rest.popFirst().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    public func isRedactedQueryName(_ name: String) -> Bool {
        redactedQueryNames.contains(name.lowercased())
    }

    /// Free text (an event's detail, an error): every URL in it redacted as `url` does, and secret values masked
    /// where they are a whole word outside the URLs.
    public func text(_ text: String, secrets: [String] = []) -> String {
        let secrets = Redactor.ordered(secrets)
        guard Redactor.schemeSeparator(in: Substring(text)) != nil else { return Redactor.maskWords(secrets, in: text) }
        var result = ""
        var rest = Substring(text)
        while let span = Redactor.urlSpan(in: rest) {
            result += Redactor.maskWords(secrets, in: String(rest[..<span.lowerBound]))
            result += url(String(rest[span]), secrets: secrets)
            rest = rest[span.upperBound...]
        }
        return result + Redactor.maskWords(secrets, in: String(rest))
    }

    /// A captured body with every secret value masked where it is a whole word.
    func body(_ body: CapturedBody, secrets: [String]) -> CapturedBody {
        guard !secrets.isEmpty else { return body }
        return CapturedBody(bytes: Redactor.maskWords(secrets, in: body.bytes), truncated: body.truncated)
    }

    /// Non-empty secrets, longest first (so a credential header is masked whole before a part of it).
    static func ordered(_ secrets: [String]) -> [String] {
        guard !secrets.isEmpty else { return [] }
        return Array(Set(secrets.filter { !$0.isEmpty })).sorted { ($0.utf8.count, $0) > ($1.utf8.count, $1) }
    }

    /// The first URL in `text` (`scheme://…` up to white space, a quote or an angle bracket, without trailing
    /// sentence punctuation), or nil.
    static func urlSpan(in text: Substring) -> Range<Substring.Index>? {
        guard let separator = schemeSeparator(in: text) else { return nil }
        var start = separator.lowerBound
        while start > text.startIndex {
            let previous = text.index(before: start)
            let character = text[previous]
            guard character.isASCII, character.isLetter || character.isNumber || "+-.".contains(character) else { break }
            start = previous
        }
        var end = text[separator.upperBound...].firstIndex(where: { $0.isWhitespace || "\"'<>".contains($0) })
            ?? text.endIndex
        while end > separator.upperBound, ".,;:)]}".contains(text[text.index(before: end)]) {
            end = text.index(before: end)
        }
        return start..<end
    }

    /// `text` with each secret masked where it stands as a whole word (see `maskWords(_:in:)` on bytes).
    static func maskWords(_ secrets: [String], in text: String) -> String {
        guard !secrets.isEmpty else { return text }
        let bytes = Array(text.utf8)
        let masked = maskWords(secrets, in: bytes)
        return masked == bytes ? text : String(decoding: masked, as: UTF8.self)
    }

    /// `haystack` with each secret masked where it stands as a whole word: a secret beginning (ending) with a word
    /// byte (ASCII letters and digits, `-`, `_`, any non-ASCII byte) must not have one just before (after) it. So
    /// the secret `t` is masked in `you said: t!` and in `key="t"`, never inside `http` or `t-shirt`.
    static func maskWords(_ secrets: [String], in haystack: [UInt8]) -> [UInt8] {
        var result = haystack
        for secret in secrets { result = maskWord(Array(secret.utf8), in: result) }
        return result
    }

    private static func maskWord(_ needle: [UInt8], in haystack: [UInt8]) -> [UInt8] {
        guard !needle.isEmpty, haystack.count >= needle.count else { return haystack }
        let mask = Array(Redactor.mask.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(haystack.count)
        var index = 0
        let first = needle[0]
        let startsWord = isWordByte(first), endsWord = isWordByte(needle[needle.count - 1])
        while index < haystack.count {
            let end = index + needle.count
            if haystack[index] == first, end <= haystack.count,
               !startsWord || index == 0 || !isWordByte(haystack[index - 1]),
               !endsWord || end == haystack.count || !isWordByte(haystack[end]),
               haystack[index..<end].elementsEqual(needle) {
                out.append(contentsOf: mask)
                index = end
            } else {
                out.append(haystack[index])
                index += 1
            }
        }
        return out
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), 0x80...: true
        default: false
        }
    }
}
