import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

/// Issue 11, item 15: the loader knows which `set_headers` values came from `${VAR}`, and the plan hands them to
/// the log as secrets.
@Suite struct SecretHeaderTests {
    @Test func headerValuesFromTheEnvironmentAreSecrets() throws {
        let set = try ruleSet("""
        rules:
          - name: keys
            match: { host: a.test }
            request: { set_headers: { X-Api-Key: "${API_KEY}", Authorization: "Bearer ${TOKEN}", X-Plain: "1", X-Dollar: "${not a var}" } }
            response: { set_headers: { X-Echo: "${TOKEN}" } }
          - name: other
            match: { host: b.test }
            request: { set_headers: { X-Other: plain } }
        """, env: ["API_KEY": "k3y", "TOKEN": "t0k"])
        let plan = set.plan(for: request("GET", "http://a.test/"))
        #expect(Set(plan.secretValues) == ["k3y", "Bearer t0k", "t0k"])
        var head = request("GET", "http://a.test/")
        plan.editRequest(&head)
        #expect(head.headers["X-Api-Key"] == "k3y")
        #expect(head.headers["X-Dollar"] == "${not a var}")
        #expect(set.plan(for: request("GET", "http://b.test/")).secretValues.isEmpty)
    }
}
