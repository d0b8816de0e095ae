/// Which rules a request's host can match, found without trying every rule: a rule whose `match.host` patterns are
/// all literal (`api.example.com`, no `*` or `?`) is filed under each of those hosts; every other rule (a wildcard
/// host, or no host at all) is a candidate for every request. With the dozens of per-host rules a real set
/// grows to, a request then tries only the rules for its own host and the wildcards.
/// Immutable; a lookup allocates nothing.
struct RuleHostIndex: Sendable {
    /// Rule positions by lowercased literal host, ascending.
    private let byHost: [String: [Int]]
    /// Positions of the rules tried for every host, ascending.
    private let everyHost: [Int]

    init(_ matches: [RuleMatch]) {
        var byHost: [String: [Int]] = [:]
        var everyHost: [Int] = []
        for (position, match) in matches.enumerated() {
            let literals = match.hosts.compactMap(\.literal)
            if match.hosts.isEmpty || literals.count != match.hosts.count {
                everyHost.append(position)
                continue
            }
            for host in Set(literals) { byHost[host, default: []].append(position) }
        }
        self.byHost = byHost
        self.everyHost = everyHost
    }

    /// The positions of every rule that may match `host`, in file order.
    func candidates(host: String) -> Candidates {
        Candidates(everyHost: everyHost, filed: byHost.isEmpty ? [] : (byHost[RuleHostIndex.lowercased(host)] ?? []))
    }

    /// Merges the two ascending lists of positions.
    struct Candidates: IteratorProtocol {
        let everyHost: [Int]
        let filed: [Int]
        var i = 0, j = 0

        mutating func next() -> Int? {
            if i < everyHost.count && (j == filed.count || everyHost[i] < filed[j]) {
                i += 1
                return everyHost[i - 1]
            }
            guard j < filed.count else { return nil }
            j += 1
            return filed[j - 1]
        }
    }

    /// ASCII-lowercased, as `Glob` compares hosts; the string itself when it has no capital letter (the usual case).
    private static func lowercased(_ host: String) -> String {
        guard host.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) else { return host }
        return String(decoding: host.utf8.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }, as: UTF8.self)
    }
}
