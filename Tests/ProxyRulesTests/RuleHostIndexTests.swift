import Testing
@testable import ProxyRules

/// Rules filed by literal host must still fire exactly as if every rule were tried, in file order.
@Suite struct RuleHostIndexTests {
    @Test func literalAndWildcardRulesFireInFileOrder() throws {
        let set = try ruleSet("""
        rules:
          - name: wildcard-first
            match: { host: "*.example.com" }
          - name: literal
            match: { host: api.example.com }
          - name: any-host
            match: { path: "/v1/*" }
          - name: other-literal
            match: { host: web.example.com }
          - name: mixed
            match: { host: [api.example.com, "*.example.org"] }
          - name: literal-again
            match: { host: [API.Example.COM, other.test] }
          - name: one-char
            match: { host: "ap?.example.com" }
        """)
        let all = ["wildcard-first", "literal", "any-host", "mixed", "literal-again", "one-char"]
        #expect(set.plan(for: request("GET", "http://api.example.com/v1/x")).firedRules == all)
        // Hosts compare case-insensitively, whichever side has the capitals.
        #expect(set.plan(for: request("GET", "http://API.example.Com/v1/x")).firedRules == all)
        #expect(set.plan(for: request("GET", "http://web.example.com/v2")).firedRules == ["wildcard-first", "other-literal"])
        #expect(set.plan(for: request("GET", "http://other.test/v1/")).firedRules == ["any-host", "literal-again"])
        #expect(set.plan(for: request("GET", "http://nowhere.test/")).firedRules.isEmpty)
    }

    /// Random rule sets and hosts: the index must fire exactly the rules that trying every rule fires, in order.
    @Test func indexAgreesWithTryingEveryRule() throws {
        let patterns = ["api.example.com", "API.example.com", "*.example.com", "*.com", "ap?.example.com", "api-*",
                        "*", "*.svc.example.org", "localhost", "*.localhost", "127.0.0.1", "127.0.0.*", "*.0.1",
                        "*example.com", "web.example.com", "*.test", "a.test"]
        let hosts = ["api.example.com", "Api.Example.COM", "web.example.com", "example.com", "x.svc.example.org",
                     "localhost", "a.localhost", "127.0.0.1", "10.0.0.1", "a.test", "test", "api-1", "apx.example.com"]
        var rng = SplitMix(seed: 42)
        for round in 0..<60 {
            var yaml = "rules:\n"
            for index in 0..<(1 + rng.next(12)) {
                let count = rng.next(3)  // 0: no host at all
                let chosen = (0..<count).map { _ in "\"\(patterns[rng.next(patterns.count)])\"" }
                let match = count == 0 ? "{ path: \"/*\" }" : "{ host: [\(chosen.joined(separator: ", "))] }"
                yaml += "  - name: r\(round)-\(index)\n    match: \(match)\n"
            }
            let set = try ruleSet(yaml)
            for host in hosts {
                let head = request("GET", "http://\(host)/x")
                let expected = set.rules.filter { RuleMatcher($0.match).match(head).isMatch }.map(\.name)
                #expect(set.plan(for: head).firedRules == expected, "\(yaml) host \(host)")
            }
        }
    }

    @Test func interceptDecisionsUseTheSameMatchers() throws {
        let set = try ruleSet("""
        rules:
          - name: no-intercept
            match: { host: pinned.example.com }
            intercept: false
          - name: intercept
            match: { host: "*.example.com" }
            intercept: true
        """)
        #expect(set.intercept(host: "pinned.example.com", port: 443) == false)
        #expect(set.intercept(host: "api.example.com", port: 443) == true)
        #expect(set.intercept(host: "example.net", port: 443) == nil)
    }

    /// The glob's early exits (too short, wrong ending) against a plain backtracking matcher, on random patterns.
    @Test func globShortcutsAgreeWithBacktracking() {
        var rng = SplitMix(seed: 0x9E37)
        let alphabet: [Character] = ["a", "b", ".", "é"]
        for _ in 0..<4000 {
            let pattern = String((0..<rng.next(4)).map { _ in ["a", "b", ".", "*", "?", "A"][rng.next(6)] as Character })
            let text = String((0..<rng.next(7)).map { _ in alphabet[rng.next(alphabet.count)] })
            for ci in [false, true] {
                guard case .success(let glob) = Glob.compile(pattern.isEmpty ? "*" : pattern, caseInsensitive: ci) else {
                    continue
                }
                let expected = Self.reference(Array(glob.pattern), Array(text), ci: ci)
                #expect(glob.matches(text) == expected, "pattern \(glob.pattern) text \(text) ci \(ci)")
            }
        }
    }

    /// `*` any run, `?` one character, the rest itself (ASCII letters folded when `ci`).
    static func reference(_ p: [Character], _ t: [Character], ci: Bool) -> Bool {
        guard let first = p.first else { return t.isEmpty }
        switch first {
        case "*": return (0...t.count).contains { reference(Array(p.dropFirst()), Array(t.dropFirst($0)), ci: ci) }
        case "?": return !t.isEmpty && reference(Array(p.dropFirst()), Array(t.dropFirst()), ci: ci)
        default:
            guard let c = t.first else { return false }
            let same = ci ? String(first).lowercased() == String(c).lowercased() : first == c
            return same && reference(Array(p.dropFirst()), Array(t.dropFirst()), ci: ci)
        }
    }
}

/// A small seeded generator, so a failure repeats.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return bound == 0 ? 0 : Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
