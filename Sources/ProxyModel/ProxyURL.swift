#if canImport(Glibc)
import Glibc
#endif

/// An absolute http(s) URL split into the parts rules match and templates use.
/// `path` never holds the query; `query` is nil when the URL has no `?`.
public struct ProxyURL: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int
    public var path: String
    public var query: String?

    public init(scheme: String, host: String, port: Int? = nil, path: String = "/", query: String? = nil) {
        self.scheme = (scheme == "http" || scheme == "https") ? scheme : scheme.lowercased()
        self.host = host
        self.port = port ?? ProxyURL.defaultPort(for: scheme)
        self.path = path.isEmpty ? "/" : path
        self.query = query
    }

    /// Parses `http://host[:port][/path][?query]` (also `https`, and bracketed IPv6 hosts).
    /// Returns nil for anything else. A fragment is dropped.
    public init?(string: String) {
        let scheme: String
        let rest0: Substring
        if string.hasPrefix("http://") {
            scheme = "http"
            rest0 = string.dropFirst(7)
        } else if string.hasPrefix("https://") {
            scheme = "https"
            rest0 = string.dropFirst(8)
        } else {
            guard let colon = string.utf8.firstIndex(of: UInt8(ascii: ":")), string[colon...].hasPrefix("://") else { return nil }
            let named = string[..<colon].lowercased()
            guard named == "http" || named == "https" else { return nil }
            scheme = named
            rest0 = string[string.index(colon, offsetBy: 3)...]
        }
        // Scanned as bytes (every separator is ASCII): this runs for every absolute-form request.
        var rest = rest0
        if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        let authorityEnd = rest.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) { authority = authority[authority.utf8.index(after: at)...] }
        guard let (host, port) = ProxyURL.splitAuthority(authority, defaultPort: ProxyURL.defaultPort(for: scheme))
        else { return nil }
        let target = rest[authorityEnd...]
        let (path, query) = ProxyURL.splitTarget(target)
        self.init(scheme: scheme, host: host, port: port, path: path, query: query)
    }

    /// `host` and `port` from `host[:port]` or `[v6]:port`; nil when malformed: the host must be a registered name
    /// of letters, digits, `-`, `.`, `_` and `~` (RFC 3986 reg-name without percent-encoding and sub-delimiters) or
    /// a bracketed IPv6 literal, so that rules match exactly the host libcurl will connect to
    /// (`evil.com#.example.com` is refused, not matched as `*.example.com`).
    public static func splitAuthority(_ authority: Substring, defaultPort: Int) -> (String, Int)? {
        guard let (host, port) = splitAuthorityUnchecked(authority, defaultPort: defaultPort),
              isValidHost(host, bracketed: authority.hasPrefix("[")) else { return nil }
        return (authority.hasPrefix("[") ? host : canonicalHost(host), port)
    }

    /// The one spelling rules see for a host libcurl would reach under several: without a trailing dot
    /// (`api.example.com.`), and IPv4 addresses in dotted-quad form (`0x0a000001`, `10.1` → `10.0.0.1`), so a rule
    /// for the host cannot be sidestepped by another spelling of it.
    static func canonicalHost(_ host: String) -> String {
        var host = host
        if host.utf8.count > 1, host.utf8.last == UInt8(ascii: ".") { host.removeLast() }
        guard let first = host.utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return host }
        if isDottedQuad(host) { return host }
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return host }
        let value = UInt32(bigEndian: address.s_addr)
        return "\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)"
    }

    /// Four decimal numbers of 0–255 without leading zeros, joined by dots: already the canonical form (the usual
    /// numeric host; rebuilding it costs a request thousands of instructions).
    static func isDottedQuad(_ host: String) -> Bool {
        var parts = 0, value = 0, digits = 0
        for byte in host.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, parts < 3 else { return false }
                parts += 1
                value = 0
                digits = 0
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), !(digits == 1 && value == 0) else { return false }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
            guard value <= 255 else { return false }
        }
        return parts == 3 && digits > 0
    }

    /// Whether `host` is a registered name (`bracketed == false`) or an IPv6 literal (`true`) hookproxy forwards to.
    public static func isValidHost(_ host: String, bracketed: Bool) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 255 else { return false }
        if bracketed {
            return host.utf8.contains(UInt8(ascii: ":")) && host.utf8.allSatisfy { byte in
                byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".") || isHexDigit(byte)
            }
        }
        return host.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                true
            default:
                false
            }
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    private static func splitAuthorityUnchecked(_ authority: Substring, defaultPort: Int) -> (String, Int)? {
        guard !authority.isEmpty else { return nil }
        if authority.utf8.first == UInt8(ascii: "[") {
            guard let close = authority.utf8.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let host = String(authority[authority.utf8.index(after: authority.startIndex)..<close])
            let after = authority[authority.utf8.index(after: close)...]
            if after.isEmpty { return (host, defaultPort) }
            guard after.hasPrefix(":"), let port = Int(after.dropFirst()), (1...65535).contains(port) else { return nil }
            return (host, port)
        }
        if let colon = authority.utf8.lastIndex(of: UInt8(ascii: ":")) {
            let host = String(authority[..<colon])
            guard !host.isEmpty, let port = Int(authority[authority.utf8.index(after: colon)...]), (1...65535).contains(port)
            else { return nil }
            return (host, port)
        }
        return (String(authority), defaultPort)
    }

    /// Splits an origin-form target `/path?query` into its path and query. A fragment (`#…`, which a client must
    /// not send, RFC 9112 §3.2) is dropped, as libcurl drops it from the URL it sends: the rules and logs see the
    /// request that leaves.
    public static func splitTarget(_ target: Substring) -> (String, String?) {
        var target = target
        if let hash = target.utf8.firstIndex(of: UInt8(ascii: "#")) { target = target[..<hash] }
        if let question = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            let path = String(target[..<question])
            return (path.isEmpty ? "/" : path, String(target[target.utf8.index(after: question)...]))
        }
        return (target.isEmpty ? "/" : String(target), nil)
    }

    /// Absolute path `path` with its dot segments removed (RFC 3986 §5.2.4): `.` dropped, `..` taking the segment
    /// before it away, never above the root; `%2E` counts as `.` (RFC 3986 §6.2.2.2: the same character). Empty
    /// segments and everything else stay as written. `/a/./b/../c` → `/a/c`, `/../x` → `/x`, `/a/..` → `/`.
    /// Segments are split at the byte `/`: a `/` followed by a combining mark is one Swift `Character`, and splitting
    /// by characters let `..` before such a slash through.
    public static func removingDotSegments(_ path: String) -> String {
        guard path.utf8.contains(UInt8(ascii: ".")) || path.utf8.contains(UInt8(ascii: "%")) else { return path }
        var segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if segments.first?.isEmpty == true { segments.removeFirst() }
        var kept: [Substring.UTF8View] = []
        for (index, segment) in segments.enumerated() {
            let isLast = index == segments.count - 1
            switch dotCount(segment) {
            case 1: if isLast { kept.append(Substring().utf8) }
            case 2:
                if !kept.isEmpty { kept.removeLast() }
                if isLast { kept.append(Substring().utf8) }
            default: kept.append(segment)
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(path.utf8.count)
        for segment in kept {
            bytes.append(UInt8(ascii: "/"))
            bytes.append(contentsOf: segment)
        }
        if bytes.isEmpty { bytes.append(UInt8(ascii: "/")) }
        // Cut at ASCII `/` only, so every piece is whole UTF-8: nothing is repaired.
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first segment of `path` that an origin could take for a dot segment though RFC 3986 does not: one whose
    /// parts between `%2F`, `%5C` or a backslash include `.` or `..` (nginx decodes `%2F` before it resolves dot
    /// segments, IIS takes `\` for `/`), or whose part before a `;` is one (`..;` is `..` to Tomcat and Jetty).
    /// Under a reverse route's prefix such a segment is refused: no rewrite of it is right for every origin.
    public static func ambiguousDotSegment(in path: String) -> String? {
        guard path.utf8.contains(UInt8(ascii: ".")) || path.utf8.contains(UInt8(ascii: "%")) else { return nil }
        for segment in path.utf8.split(separator: UInt8(ascii: "/")) {
            var parts: [Substring.UTF8View] = []
            var rest = segment
            while let cut = encodedSlash(in: rest) {
                parts.append(rest[..<cut.lowerBound])
                rest = rest[cut.upperBound...]
            }
            parts.append(rest)
            let split = parts.count > 1
            for part in parts {
                let beforeParameters = part.firstIndex(of: UInt8(ascii: ";")).map { part[..<$0] } ?? part
                if (split || beforeParameters.count < part.count) && dotCount(beforeParameters) > 0 {
                    return String(decoding: segment, as: UTF8.self)
                }
            }
        }
        return nil
    }

    /// The first `%2F`, `%5C` (either case) or backslash in `bytes`.
    private static func encodedSlash(in bytes: Substring.UTF8View) -> Range<Substring.UTF8View.Index>? {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\") { return index..<bytes.index(after: index) }
            if byte == UInt8(ascii: "%"), bytes.distance(from: index, to: bytes.endIndex) >= 3 {
                let high = bytes[bytes.index(index, offsetBy: 1)]
                let low = bytes[bytes.index(index, offsetBy: 2)] | 0x20
                if (high == UInt8(ascii: "2") && low == UInt8(ascii: "f")) || (high == UInt8(ascii: "5") && low == UInt8(ascii: "c")) {
                    return index..<bytes.index(index, offsetBy: 3)
                }
            }
            index = bytes.index(after: index)
        }
        return nil
    }

    /// 1 for a segment `.`, 2 for `..` (either spelled with `%2E`), else 0.
    private static func dotCount(_ segment: Substring.UTF8View) -> Int {
        var dots = 0
        var bytes = segment[...]
        while let first = bytes.first {
            if first == UInt8(ascii: ".") {
                bytes = bytes.dropFirst()
            } else if bytes.count >= 3, first == UInt8(ascii: "%"),
                      bytes.dropFirst().first == UInt8(ascii: "2"),
                      bytes.dropFirst(2).first.map({ $0 | 0x20 }) == UInt8(ascii: "e") {
                bytes = bytes.dropFirst(3)
            } else {
                return 0
            }
            dots += 1
            if dots > 2 { return 0 }
        }
        return dots
    }

    public static func defaultPort(for scheme: String) -> Int {
        scheme == "https" || (scheme != "http" && scheme.lowercased() == "https") ? 443 : 80
    }

    public var isDefaultPort: Bool { port == ProxyURL.defaultPort(for: scheme) }

    /// `host` or `host:port` (port only when not the scheme's default); IPv6 hosts in brackets.
    public var authority: String {
        let showsPort = !isDefaultPort
        if !showsPort, !host.utf8.contains(UInt8(ascii: ":")) { return host }
        return URLText.build(capacity: host.utf8.count + 24) { text in
            text.appendAuthority(host: host, port: showsPort ? port : nil)
        }
    }

    /// The request target in origin form: path plus `?query` when present.
    public var pathAndQuery: String { query.map { "\(path)?\($0)" } ?? path }

    /// The asterisk-form target of `OPTIONS *` (RFC 9112 §3.2.4): the server as a whole, not a resource. Its
    /// `path` is `*`; written out, the URL has an empty path (`http://host:port`), the absolute form that means it.
    public var isAsterisk: Bool { path == "*" }

    /// `url` with the asterisk-form target, for an `OPTIONS` request that asks about the server as a whole.
    public static func asterisk(scheme: String, host: String, port: Int) -> ProxyURL {
        ProxyURL(scheme: scheme, host: host, port: port, path: "*")
    }

    /// Whether absolute-form `target` has an empty path and no query (`http://host:port`): for `OPTIONS`, RFC 9112
    /// §3.2.4 has the last proxy send `*`.
    public static func hasEmptyPath(_ target: String) -> Bool {
        let bytes = Array(target.utf8.prefix { $0 != UInt8(ascii: "#") })
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else { return false }
        return !bytes[(colon + 3)...].contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }
    }

    /// `scheme://authority/path?query`, written into one buffer: each request makes it twice (curl's URL, the log
    /// record), and appending its parts to a `String` one by one cost ~3,000 instructions each time.
    public var description: String {
        let capacity = scheme.utf8.count + host.utf8.count + path.utf8.count + (query?.utf8.count ?? 0) + 32
        return URLText.build(capacity: capacity) { text in
            text.append(scheme)
            text.append("://")
            text.appendAuthority(host: host, port: isDefaultPort ? nil : port)
            if !isAsterisk { text.append(path) }  // RFC 9112 §3.2.4: an empty path stands for `OPTIONS *`
            if let query {
                text.append("?")
                text.append(query)
            }
        }
    }

    /// scheme, host (lower-cased) and port: what "same origin" compares.
    public var origin: String { "\(scheme)://\(host.lowercased()):\(port)" }
}

/// Writes a URL's parts end to end into a new string's storage: one allocation, each part copied whole.
struct URLText {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0

    private init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// A string of at most `capacity` UTF-8 bytes, written by `write`.
    @inline(__always)
    static func build(capacity: Int, _ write: (inout URLText) -> Void) -> String {
        String(unsafeUninitializedCapacity: capacity) { buffer in
            var text = URLText(buffer)
            write(&text)
            return text.count
        }
    }

    @inline(__always)
    mutating func append(_ part: String) {
        var part = part
        part.withUTF8 { bytes in
            precondition(count + bytes.count <= buffer.count, "URLText: capacity too small")
            UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[count...]))
                .copyMemory(from: UnsafeRawBufferPointer(bytes))
            count += bytes.count
        }
    }

    /// `host` (in brackets when it is an IPv6 literal), then `:port` when given.
    @inline(__always)
    mutating func appendAuthority(host: String, port: Int?) {
        let bracketed = host.utf8.contains(UInt8(ascii: ":"))
        if bracketed { append("[") }
        append(host)
        if bracketed { append("]") }
        guard let port else { return }
        append(":")
        appendDecimal(port)
    }

    /// `value`'s decimal digits (a port: 0 to 65535), without making a string of them.
    @inline(__always)
    mutating func appendDecimal(_ value: Int) {
        if value < 0 { append("-") }
        var digits = 1
        var rest = value.magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        precondition(count + digits <= buffer.count, "URLText: capacity too small")
        rest = value.magnitude
        for index in stride(from: count + digits - 1, through: count, by: -1) {
            buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        count += digits
    }
}
