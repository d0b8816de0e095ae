import ProxyModel

/// The compiled `match:` of a rule as the parser fills it in. Every given field must match; an omitted one matches
/// anything. `RuleMatcher` does the matching.
struct RuleMatch: Sendable {
    var hosts: [Glob] = []
    var schemes: [String] = []
    var ports: [Int] = []
    var methods: [String] = []
    var path: Glob?
    var pathRegex: CompiledRegex?
    var query: [(name: String, value: Glob)] = []
    var headers: [(name: String, value: Glob)] = []
    /// `match.websocket`: true matches only WebSocket handshakes (`Upgrade: websocket`), false only other requests.
    var websocket: Bool?
}
