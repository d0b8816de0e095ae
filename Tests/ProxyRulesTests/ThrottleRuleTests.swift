import ProxyModel
import Testing
@testable import ProxyRules

/// `throttle` in rule files: what loads, what `check` refuses (at file:line:col), and how matching rules combine.
@Suite struct ThrottleRuleTests {
    @Test("a throttle mapping loads; any subset of the keys")
    func mapping() throws {
        let set = try ruleSet("""
        rules:
          - name: slow
            throttle: { down_kbps: 1000, up_kbps: 500, latency_ms: 100 }
          - name: only-latency
            match: { path: "/lat" }
            throttle: { latency_ms: 50 }
        """)
        let plan = set.plan(for: request("GET", "http://a.test/x"))
        #expect(plan.throttle == Throttle(downKbps: 1000, upKbps: 500, latencyMs: 100))
    }

    @Test("a preset name is the short form; its case does not matter")
    func presetShortForm() throws {
        let set = try ruleSet("rules:\n  - name: s\n    throttle: Slow-3G\n")
        #expect(set.plan(for: request("GET", "http://a.test/")).throttle == Throttle.preset(named: "slow-3g"))
    }

    @Test("per field, the first matching rule that sets it wins; a rule that sets nothing leaves it to --throttle")
    func perFieldFirstWins() throws {
        let set = try ruleSet("""
        rules:
          - name: api-latency
            match: { host: api.test }
            throttle: { latency_ms: 300 }
          - name: everything-slow
            throttle: { down_kbps: 400, latency_ms: 2000 }
          - name: none
            match: { host: other.test }
        """)
        #expect(set.plan(for: request("GET", "http://api.test/")).throttle == Throttle(downKbps: 400, latencyMs: 300))
        #expect(set.plan(for: request("GET", "http://b.test/")).throttle == Throttle(downKbps: 400, latencyMs: 2000))
        let flag = Throttle(downKbps: 1, upKbps: 2, latencyMs: 3)
        #expect(set.plan(for: request("GET", "http://api.test/")).throttle?.filling(from: flag)
                == Throttle(downKbps: 400, upKbps: 2, latencyMs: 300))
        let bare = try ruleSet("rules:\n  - name: n\n    delay_ms: 1\n")
        #expect(bare.plan(for: request("GET", "http://a.test/")).throttle == nil)
    }

    @Test("wrong values and keys are errors at their line and column", arguments: [
        ("throttle: { down_kbps: -1 }", "r.yaml:3:28: 'throttle.down_kbps' must be between 0 and 10000000, found -1"),
        ("throttle: { up_kbps: 1.5 }", "r.yaml:3:26: 'throttle.up_kbps' must be a whole number, found '1.5'"),
        ("throttle: { latency_ms: 600001 }", "r.yaml:3:29: 'throttle.latency_ms' must be between 0 and 600000, found 600001"),
        ("throttle: { down_kpbs: 10 }", "r.yaml:3:17: unknown key 'down_kpbs' in 'throttle' — did you mean 'down_kbps'?"),
        ("throttle: {}", "r.yaml:3:15: 'throttle' needs at least one of down_kbps, up_kbps, latency_ms"),
        ("throttle: slow3g", "r.yaml:3:15: unknown throttle preset 'slow3g' — did you mean 'slow-3g'? (presets: 3g, slow-3g, edge; or a mapping of down_kbps, up_kbps, latency_ms)"),
        ("throttle: [1]", "r.yaml:3:15: 'throttle' must be a mapping, found a list"),
        ("throtle: { up_kbps: 1 }", "r.yaml:3:5: unknown key 'throtle' in 'rule' — did you mean 'throttle'?"),
    ])
    func errors(line: String, expected: String) {
        #expect(errorsOf("rules:\n  - name: a\n    \(line)\n") == [expected])
    }
}
