import ProxyModel
import Testing
@testable import ProxyRules

/// `match.websocket` and the `websocket` rule key: what loads, what is refused, and how matching rules combine.
@Suite struct WebSocketRuleTests {
    static let handshake = HeaderFields([HeaderField(name: "Upgrade", value: "websocket"),
                                         HeaderField(name: "Connection", value: "Upgrade")])

    @Test("match.websocket: true matches only handshakes, false only other requests")
    func matchWebSocket() throws {
        let set = try ruleSet("""
        rules:
          - name: ws
            match: { websocket: true }
          - name: not-ws
            match: { websocket: false }
        """)
        var upgrade = request("GET", "http://a.test/live")
        upgrade.headers = Self.handshake
        #expect(set.plan(for: upgrade).firedRules == ["ws"])
        #expect(set.plan(for: request("GET", "http://a.test/live")).firedRules == ["not-ws"])
    }

    @Test("every matching rule's websocket steps apply to text messages, in file order")
    func transformsCombine() throws {
        let set = try ruleSet("""
        rules:
          - name: first
            websocket:
              to_server: { replace: [ { text: "a", with: "b" } ] }
          - name: second
            websocket:
              to_server: { replace: [ { text: "b", with: "c" } ] }
              to_client: { json: { set: { seen: true } } }
        """)
        let plan = set.plan(for: request("GET", "http://a.test/"))
        var headers = HeaderFields()
        #expect(plan.webSocketToServer?.apply(to: Array("a".utf8), headers: &headers).body == Array("c".utf8))
        let edited = plan.webSocketToClient?.apply(to: Array(#"{"x":1}"#.utf8), headers: &headers).body ?? []
        #expect(String(decoding: edited, as: UTF8.self).contains(#""seen":true"#))
    }

    @Test("unknown keys under websocket and an empty websocket are refused at load")
    func refused() {
        #expect(throws: (any Error).self) { try ruleSet("rules:\n  - name: w\n    websocket: { to_browser: { replace: [] } }\n") }
        #expect(throws: (any Error).self) { try ruleSet("rules:\n  - name: w\n    websocket: {}\n") }
        #expect(throws: (any Error).self) { try ruleSet("rules:\n  - name: w\n    match: { websocket: maybe }\n") }
    }
}
