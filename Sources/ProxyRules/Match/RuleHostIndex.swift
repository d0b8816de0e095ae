/// Which rules a request's host can match, found without trying every rule. A rule is filed under a key for each of
/// its `match.host` patterns:
/// - a literal host (`api.example.com`, no `*` or `?`) under itself;
/// - a wildcard whose part after the last `*` or `?` holds a dot (`*.svc.example.com`) under its last label, as
///   `*.com`: every host it matches ends in that label;
/// and a rule with any other pattern (`api-*`), or with no host, is tried for every request. A request then tries
/// the rules filed under its host and under its last label, and the rest, merged back into file order.
/// Immutable; a lookup allocates nothing beyond a short key.
struct RuleHostIndex: Sendable {
    /// Rule positions by key, ascending.
    private let filed: [String: [Int]]
    /// Positions of the rules tried for every host, ascending.
    private let everyHost: [Int]

    init(_ matches: [RuleMatch]) {
        var filed: [String: [Int]] = [:]
        var everyHost: [Int] = []
        for (position, match) in matches.enumerated() {
            let keys = match.hosts.compactMap(RuleHostIndex.key)
            if match.hosts.isEmpty || keys.count != match.hosts.count {
                everyHost.append(position)
                continue
            }
            for key in Set(keys) { filed[key, default: []].append(position) }
        }
        self.filed = filed
        self.everyHost = everyHost
    }

    /// Where a host pattern is filed; nil when the rule must be tried for every host.
    private static func key(_ glob: Glob) -> String? {
        if let literal = glob.literal { return literal }
        let tail = glob.literalTail
        guard let dot = tail.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return "*." + tail[tail.utf8.index(after: dot)...]
    }

    /// The positions of every rule that may match `host`, in file order.
    func candidates(host: String) -> Candidates {
        guard !filed.isEmpty else { return Candidates(lists: (everyHost, [], [])) }
        let host = host.asciiLowercased()  // as `Glob` compares hosts
        let label = host.utf8.lastIndex(of: UInt8(ascii: ".")).map { host[host.utf8.index(after: $0)...] } ?? host[...]
        return Candidates(lists: (everyHost, filed[host] ?? [], filed["*." + label] ?? []))
    }

    /// Merges three ascending lists of positions (a rule filed under both keys comes once).
    struct Candidates: IteratorProtocol {
        let lists: ([Int], [Int], [Int])
        var i = 0, j = 0, k = 0

        mutating func next() -> Int? {
            let a = i < lists.0.count ? lists.0[i] : Int.max
            let b = j < lists.1.count ? lists.1[j] : Int.max
            let c = k < lists.2.count ? lists.2[k] : Int.max
            let next = min(a, b, c)
            guard next != Int.max else { return nil }
            if a == next { i += 1 }
            if b == next { j += 1 }
            if c == next { k += 1 }
            return next
        }
    }
}
