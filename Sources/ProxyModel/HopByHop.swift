/// Hop-by-hop header handling (RFC 9110 §7.6.1): these headers describe one connection and are never forwarded.
public enum HopByHop {
    /// Always hop-by-hop, whatever `Connection` says (compared without allocating). `Trailer` is not: it names the
    /// trailer fields that follow the body, and those are forwarded.
    private static let standard = ["connection", "keep-alive", "proxy-connection", "proxy-authorization",
                                   "proxy-authenticate", "te", "transfer-encoding", "upgrade"]

    /// Removes the standard hop-by-hop headers and every header named in `Connection`.
    /// `TE: trailers` survives (RFC 9110 §10.1.4: it says the client takes trailers; gRPC servers send them only
    /// then), as `TE: trailers` alone.
    public static func strip(_ headers: inout HeaderFields) {
        var named: [String] = []
        for value in headers.values(for: "connection") {
            for token in value.split(separator: ",") { named.append(token.trimmingSpaces()) }
        }
        guard headers.contains(where: { field in isHopByHop(field.name, named) }) else { return }
        let takesTrailers = headers.values(for: "te").contains { value in
            value.split(separator: ",").contains { $0.split(separator: ";").first?.trimmingSpaces().lowercased() == "trailers" }
        }
        headers.removeAll { field in isHopByHop(field.name, named) }
        if takesTrailers && !named.contains(where: { $0.caseInsensitiveEquals("te") }) { headers.add("TE", "trailers") }
    }

    @inline(__always)
    private static func isHopByHop(_ name: String, _ named: [String]) -> Bool {
        standard.contains { name.caseInsensitiveEquals($0) } || named.contains { name.caseInsensitiveEquals($0) }
    }
}

extension StringProtocol {
    /// The string without leading and trailing spaces and tabs (HTTP's optional whitespace), read as bytes: the
    /// log path trims every header value and media type, and Foundation's `trimmingCharacters(in:)` cost a
    /// sixth of a request's instructions there.
    public func trimmingSpaces() -> String {
        let text = Substring(self)
        let bytes = text.utf8
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start = bytes.index(after: start) }
        while start < end {
            let before = bytes.index(before: end)
            guard bytes[before] == 0x20 || bytes[before] == 0x09 else { break }
            end = before
        }
        return String(text[start..<end])
    }
}
