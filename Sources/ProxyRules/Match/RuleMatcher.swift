import ProxyModel

/// A rule's `match:`, ready to try against requests. A class with constant fields: a rule set tries dozens of these
/// per request, and Swift copies a struct (every array and string in it retained, then released) to call a method on
/// it out of an array, where a class costs one reference.
/// Immutable; matching allocates only for `path_regex` groups.
final class RuleMatcher: Sendable {
    /// The fields, read one at a time (reading one copies only that field).
    private let spec: RuleMatch

    init(_ spec: RuleMatch) { self.spec = spec }

    /// Whether the request matches, with the `$0, $1…` of `path_regex` (just `[path]` without one), telling a
    /// `path_regex` that ran out of its budget (the rule does not match, and the log says why) from one that found
    /// nothing.
    func match(_ request: RequestHead) -> CompiledRegex.FirstMatch {
        let url = request.url
        guard matchesHostAndPort(host: url.host, port: url.port) else { return .notMatched }
        if !spec.schemes.isEmpty && !spec.schemes.contains(url.scheme) { return .notMatched }
        if !spec.methods.isEmpty && !spec.methods.contains(request.method) { return .notMatched }
        if let websocket = spec.websocket, RuleMatcher.isWebSocketHandshake(request) != websocket { return .notMatched }
        if let path = spec.path, !path.matches(url.path) { return .notMatched }
        if !spec.query.isEmpty {
            let pairs = RuleMatcher.queryPairs(url.query)
            for (name, glob) in spec.query {
                guard pairs.contains(where: { $0.0 == name && glob.matches($0.1) }) else { return .notMatched }
            }
        }
        for (name, glob) in spec.headers {
            guard request.headers.values(for: name).contains(where: { glob.matches($0) }) else { return .notMatched }
        }
        if let pathRegex = spec.pathRegex {
            return pathRegex.firstMatch(in: url.path)
        }
        return .matched([url.path])
    }

    /// The rule's `path_regex`, for a message.
    var pathRegexPattern: String? { spec.pathRegex?.pattern }

    /// Whether the request asks for a WebSocket (`Upgrade: websocket`; the server keeps the header on handshakes only).
    static func isWebSocketHandshake(_ request: RequestHead) -> Bool {
        request.headers.values(for: "upgrade").contains { value in
            value.split(separator: ",").contains { $0.trimmingSpaces().lowercased() == "websocket" }
        }
    }

    /// What a CONNECT can be judged by: host and port only.
    func matchesHostAndPort(host: String, port: Int) -> Bool {
        if !spec.hosts.isEmpty && !spec.hosts.contains(where: { $0.matches(host) }) { return false }
        if !spec.ports.isEmpty && !spec.ports.contains(port) { return false }
        return true
    }

    /// `name=value` pairs of a query, percent-decoded; a name without `=` has the value "".
    static func queryPairs(_ query: String?) -> [(String, String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            if let equals = pair.firstIndex(of: "=") {
                return (percentDecoded(pair[..<equals]), percentDecoded(pair[pair.index(after: equals)...]))
            }
            return (percentDecoded(pair), "")
        }
    }

    static func percentDecoded(_ text: Substring) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
               let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
