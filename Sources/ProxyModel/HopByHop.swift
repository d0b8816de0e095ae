/// Hop-by-hop header handling (RFC 9110 §7.6.1): these headers describe one connection and are never forwarded.
public enum HopByHop {
    /// Which message a head belongs to: `TE` means something in a request only.
    public enum Message: Sendable { case request, response }

    /// Removes the standard hop-by-hop headers and every header named in `Connection`, and those names from
    /// `Trailer` (the trailers they name are dropped too: `strip(trailers:connection:in:)`).
    /// In a request `TE: trailers` survives (RFC 9110 §10.1.4: it says the client takes trailers; gRPC servers send
    /// them only then), as `TE: trailers` alone. In a response `TE` has no meaning and goes whatever it says (HTTP/2
    /// allows it in requests only, RFC 9113 §8.2.2).
    public static func strip(_ headers: inout HeaderFields, in message: Message = .request) {
        // One pass finds whether there is anything to strip, the names `Connection` lists and what `TE` says; most
        // heads hold no hop-by-hop field but `Connection` (every field named in it is hop-by-hop only because it is).
        var found = false
        var named: [String] = []
        var takesTrailers = false
        for field in headers.fields where isStandard(field.name) {
            found = true
            if field.name.utf8.count == 10, field.name.caseInsensitiveEquals("connection") {
                forEachListItem(field.value) { named.append(String($0)) }
            } else if field.name.utf8.count == 2 {
                forEachListItem(field.value) { item in
                    let parameterStart = item.utf8.firstIndex(of: UInt8(ascii: ";")) ?? item.endIndex
                    if item[..<parameterStart].trimmingSpaces().caseInsensitiveEquals("trailers") { takesTrailers = true }
                }
            }
        }
        guard found else { return }
        if named.count > manyNamed {
            // A `Connection` naming thousands of fields (a 64 KiB head holds ~16,000) against thousands of fields
            // would cost their product in comparisons: seconds of the event loop for one request.
            let lowercased = Set(named.map { $0.asciiLowercased() })
            headers.removeAll { field in isStandard(field.name) || lowercased.contains(field.name.asciiLowercased()) }
        } else {
            headers.removeAll { field in isHopByHop(field.name, named) }
        }
        if message == .request, takesTrailers, !named.contains(where: { $0.caseInsensitiveEquals("te") }) { headers.add("TE", "trailers") }
        pruneTrailer(&headers, named: named)
    }

    /// A `Trailer` field announces the trailer fields to come. Those that will be dropped (hop-by-hop ones, and
    /// those `Connection` names) leave the announcement too, and a `Trailer` left naming nothing goes; the field
    /// keeps its place.
    private static func pruneTrailer(_ headers: inout HeaderFields, named: [String]) {
        guard headers.contains("trailer") else { return }
        let lowercased = Set(named.map { $0.asciiLowercased() })
        var kept: [String] = []
        var dropped = false
        for announced in headers.values(for: "trailer") {
            forEachListItem(announced) { item in
                let name = String(item)
                if isStandard(name) || lowercased.contains(name.asciiLowercased()) { dropped = true } else { kept.append(name) }
            }
        }
        guard dropped else { return }
        if kept.isEmpty { headers.remove("trailer") } else { headers.set("Trailer", kept.joined(separator: ", ")) }
    }

    /// Strips a message's trailer fields as `strip` strips a head, and also every field its head named in
    /// `Connection` (`connection`: the values of the head's Connection fields; RFC 9110 §7.6.1: those are hop-by-hop
    /// wherever they come, and the trailers cannot say so themselves).
    public static func strip(trailers: inout HeaderFields, connection: [String], in message: Message) {
        strip(&trailers, in: message)
        var named: [String] = []
        for value in connection { forEachListItem(value) { named.append(String($0)) } }
        if named.count > manyNamed {
            // As in a head: a hostile upstream's thousands of names against thousands of trailers cost their
            // product in comparisons (a minute of the event loop for 30,000 × 15,000).
            let lowercased = Set(named.map { $0.asciiLowercased() })
            trailers.removeAll { lowercased.contains($0.name.asciiLowercased()) }
        } else if !named.isEmpty {
            trailers.removeAll { field in named.contains { field.name.caseInsensitiveEquals($0) } }
        }
    }

    /// Past this many names in `Connection`, they are looked up in a set (a real client names one or two).
    static let manyNamed = 8

    /// Calls `body` with each non-empty item of a comma-separated field value, without its surrounding spaces.
    @inline(__always)
    static func forEachListItem(_ value: String, _ body: (Substring) -> Void) {
        for item in value.utf8.split(separator: UInt8(ascii: ",")) {
            let trimmed = Substring(item).trimmingSpaces()
            if !trimmed.isEmpty { body(Substring(trimmed)) }
        }
    }

    @inline(__always)
    private static func isHopByHop(_ name: String, _ named: [String]) -> Bool {
        isStandard(name) || named.contains { name.caseInsensitiveEquals($0) }
    }

    /// Always hop-by-hop, whatever `Connection` says: Connection, Keep-Alive, Proxy-Connection, Proxy-Authorization,
    /// Proxy-Authenticate, TE, Transfer-Encoding and Upgrade. `Trailer` is not: it names the trailer fields that
    /// follow the body, and those are forwarded. Looked up by length first: most names have a length none of these has.
    static func isStandard(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: name.caseInsensitiveEquals("te")
        case 7: name.caseInsensitiveEquals("upgrade")
        case 10: name.caseInsensitiveEquals("connection") || name.caseInsensitiveEquals("keep-alive")
        case 16: name.caseInsensitiveEquals("proxy-connection")
        case 17: name.caseInsensitiveEquals("transfer-encoding")
        case 18: name.caseInsensitiveEquals("proxy-authenticate")
        case 19: name.caseInsensitiveEquals("proxy-authorization")
        default: false
        }
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
