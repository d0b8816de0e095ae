import Testing
@testable import ProxyRules

@Suite struct MatchTests {
    func glob(_ pattern: String, ci: Bool = false) -> Glob {
        try! Glob.compile(pattern, caseInsensitive: ci).get()
    }

    @Test func globBasics() {
        #expect(glob("*.example.com", ci: true).matches("API.Example.com"))
        #expect(!glob("*.example.com", ci: true).matches("example.com"))
        #expect(glob("/v1/*").matches("/v1/users/42"))
        #expect(glob("/v1/*/x").matches("/v1/a/b/x"))
        #expect(glob("/u?").matches("/u1"))
        #expect(!glob("/u?").matches("/u"))
        #expect(glob("/caf?").matches("/café"))
        #expect(!glob("/V1/*").matches("/v1/a"))
        #expect(glob("*a*a*a*a*b").matches(String(repeating: "a", count: 40) + "b"))
        #expect(!glob("*a*a*a*a*b").matches(String(repeating: "a", count: 2000)))
    }

    @Test func everyFieldMustMatch() throws {
        let set = try ruleSet("""
        rules:
          - name: full
            match:
              host: ["*.example.com", "example.org"]
              scheme: https
              port: 8443
              method: [GET, POST]
              path: "/v1/*"
              query: { debug: "1", mode: "t*" }
              header: { X-Env: "stag*" }
        """)
        let good = request("GET", "https://api.example.com:8443/v1/users?debug=1&mode=test",
                           headers: [("x-env", "staging")])
        #expect(set.plan(for: good).firedRules == ["full"])
        let variants = [
            request("GET", "https://example.com:8443/v1/users?debug=1&mode=test", headers: [("X-Env", "staging")]),
            request("GET", "http://api.example.com:8443/v1/users?debug=1&mode=test", headers: [("X-Env", "staging")]),
            request("GET", "https://api.example.com/v1/users?debug=1&mode=test", headers: [("X-Env", "staging")]),
            request("get", "https://api.example.com:8443/v1/users?debug=1&mode=test", headers: [("X-Env", "staging")]),
            request("GET", "https://api.example.com:8443/v2/users?debug=1&mode=test", headers: [("X-Env", "staging")]),
            request("GET", "https://api.example.com:8443/v1/users?debug=2&mode=test", headers: [("X-Env", "staging")]),
            request("GET", "https://api.example.com:8443/v1/users?debug=1&mode=Test", headers: [("X-Env", "staging")]),
            request("GET", "https://api.example.com:8443/v1/users?debug=1&mode=test", headers: [("X-Env", "Staging")]),
            request("GET", "https://api.example.com:8443/v1/users?debug=1&mode=test"),
        ]
        for variant in variants {
            #expect(set.plan(for: variant).firedRules.isEmpty, "\(variant.method) \(variant.url) \(variant.headers)")
        }
        #expect(set.plan(for: request("POST", "https://EXAMPLE.ORG:8443/v1/?mode=t&debug=1", headers: [("X-Env", "stag")]))
            .firedRules == ["full"])
    }

    @Test func pathIgnoresQueryAndRegexFeedsGroups() throws {
        let set = try ruleSet("""
        rules:
          - name: exact
            match: { path: /health }
          - name: regex
            match: { path_regex: "^/v1/(\\\\w+)/(\\\\d+)$" }
            map_remote: { to: "http://127.0.0.1:9000/v2/$2/$1" }
        """)
        #expect(set.plan(for: request("GET", "http://h/health?x=1")).firedRules == ["exact"])
        let plan = set.plan(for: request("GET", "http://h/v1/users/42?x=1"))
        #expect(plan.firedRules == ["regex"])
        #expect(plan.upstreamURL.description == "http://127.0.0.1:9000/v2/42/users")
    }

    @Test func emptyMatchMatchesEverything() throws {
        let set = try ruleSet("rules:\n  - name: all\n  - name: also\n    match: {}\n")
        #expect(set.plan(for: request("DELETE", "https://x.test/a?b")).firedRules == ["all", "also"])
    }

    @Test func interceptUsesHostAndPortOnly() throws {
        let set = try ruleSet("""
        rules:
          - name: no-bank
            match: { host: "*.bank.test" }
            intercept: false
          - name: api
            match: { host: "*.test", port: 443, path: /ignored-for-connect }
            intercept: true
          - name: unrelated
            match: { host: other.test }
        """)
        #expect(set.intercept(host: "www.bank.test", port: 443) == false)
        #expect(set.intercept(host: "api.test", port: 443) == true)
        #expect(set.intercept(host: "api.test", port: 8443) == nil)
        #expect(set.intercept(host: "other.example", port: 443) == nil)
    }

    @Test func manyRulesStayCheap() throws {
        var yaml = "rules:\n"
        for index in 0..<500 {
            yaml += "  - name: r\(index)\n    match: {host: \"h\(index).example.test\", path_regex: \"^/v\(index)/(.*)$\"}\n    map_remote: {to: \"http://127.0.0.1:9000/$1\"}\n"
        }
        let set = try ruleSet(yaml)
        #expect(set.ruleCount == 500)
        // Speed is the benchmark's business (bench/, with 50 rules loaded); here: the last of 500 rules still matches.
        #expect(set.plan(for: request("GET", "http://h499.example.test/v499/x")).upstreamURL.description == "http://127.0.0.1:9000/x")
    }
}
