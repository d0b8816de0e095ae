import ProxyModel

/// Following redirects hop by hop (`on_redirect: follow`): a value holding the hops so far, and a pure function
/// that builds the next request — 303 (and 301/302 after POST) become GET without a body, 307/308 keep method
/// and body, Authorization and Cookie are dropped when the origin changes.
public struct RedirectFollower: Sendable {
    public let policy: RedirectPolicy
    /// Every URL requested so far, in order (the original first).
    public private(set) var chain: [ProxyURL]
    private var visited: Set<String>

    public init(policy: RedirectPolicy, original: RequestHead) {
        self.policy = policy
        self.chain = [original.url]
        self.visited = [RedirectFollower.key(original.method, original.url)]
    }

    public var hops: Int { chain.count - 1 }

    /// What to do with a 3xx answer to `request`.
    public enum Step: Equatable, Sendable {
        /// Hand the 3xx to the client as it is (no Location, or another origin with same_host_only).
        case pass
        case follow(RequestHead, bodyKept: Bool)
        case fail(ProxyError)
    }

    public mutating func next(after request: RequestHead, status: Int, location: String) -> Step {
        guard let target = RedirectFollower.resolve(location, against: request.url) else { return .pass }
        if policy.sameHostOnly && target.origin != request.url.origin { return .pass }
        let host = chain[0].authority
        if hops >= policy.maxHops {
            return .fail(ProxyError(.redirectLimit, "hookproxy: redirect limit \(host): more than \(policy.maxHops) hops: \(describe(plus: target))"))
        }
        var next = request
        next.url = target
        var bodyKept = true
        if status == 303 && request.method != "HEAD" || (status == 301 || status == 302) && request.method == "POST" {
            next.method = "GET"
            bodyKept = false
            for name in ["Content-Length", "Content-Type", "Transfer-Encoding", "Content-Encoding"] { next.headers.remove(name) }
        }
        if target.origin != request.url.origin {
            next.headers.remove("Authorization")
            next.headers.remove("Cookie")
        }
        next.headers.set("Host", target.authority)
        let key = RedirectFollower.key(next.method, target)
        if visited.contains(key) {
            return .fail(ProxyError(.redirectLimit, "hookproxy: redirect loop \(host): \(describe(plus: target))"))
        }
        visited.insert(key)
        chain.append(target)
        return .follow(next, bodyKept: bodyKept && status != 303)
    }

    private func describe(plus target: ProxyURL) -> String {
        (chain + [target]).map(\.description).joined(separator: " → ")
    }

    private static func key(_ method: String, _ url: ProxyURL) -> String { "\(method) \(url)" }

    /// A Location made absolute against the URL it answered (absolute, scheme-relative, absolute-path, relative).
    public static func resolve(_ location: String, against base: ProxyURL) -> ProxyURL? {
        let trimmed = location.trimmingSpaces()
        guard !trimmed.isEmpty else { return nil }
        if let absolute = ProxyURL(string: trimmed) { return absolute }
        // A Location that names a scheme (RFC 3986 §3.1) is absolute: one hookproxy cannot fetch (`file:`, `data:`,
        // `mailto:`, `gopher://`) or cannot parse (`http://host:99999/`) is not a path on the current origin.
        if hasScheme(trimmed) { return nil }
        if trimmed.hasPrefix("//") { return ProxyURL(string: "\(base.scheme):\(trimmed)") }
        var target = Substring(trimmed)
        if let hash = target.firstIndex(of: "#") { target = target[..<hash] }
        var (path, query) = ProxyURL.splitTarget(target)
        if target.hasPrefix("?") {
            path = base.path
        } else if !target.hasPrefix("/") {
            let directory = base.path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            path = ProxyURL.removingDotSegments(directory + "/" + path)
        }
        return ProxyURL(scheme: base.scheme, host: base.host, port: base.port, path: path, query: query)
    }

    /// Whether `reference` starts with `scheme ":"`, scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
    /// (A relative path whose first segment holds a colon must be written `./a:b`, RFC 3986 §4.2.)
    private static func hasScheme(_ reference: String) -> Bool {
        var bytes = reference.utf8.makeIterator()
        guard let first = bytes.next(), isLetter(first) else { return false }
        while let byte = bytes.next() {
            if byte == UInt8(ascii: ":") { return true }
            guard isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") else { return false }
        }
        return false
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    /// `rewrite.from` is a prefix of the absolute Location; nil when it does not apply.
    public static func rewrite(_ location: String, against base: ProxyURL, with rewrite: RedirectPolicy.Rewrite) -> String? {
        let absolute = resolve(location, against: base)?.description ?? location
        guard absolute.hasPrefix(rewrite.from) else { return nil }
        return rewrite.to + absolute.dropFirst(rewrite.from.count)
    }
}
