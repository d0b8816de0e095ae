import FoundationEssentials
import ProxyModel

/// Turns the YAML of one file into compiled rules, reporting every problem to the FileContext.
/// A rule with any error is dropped (the whole load then fails, so nothing is half-applied).
struct RuleParser {
    let ctx: FileContext

    static let topKeys = ["rules"]
    static let ruleKeys = ["name", "match", "map_remote", "respond", "redirect_client", "request", "response",
                           "delay_ms", "throttle", "on_redirect", "on_challenge", "trust", "intercept", "websocket"]
    static let matchKeys = ["host", "scheme", "port", "method", "path", "path_regex", "query", "header", "websocket"]
    static let webSocketKeys = ["to_server", "to_client"]
    static let requestKeys = ["set_headers", "remove_headers", "body"]
    static let responseKeys = ["status", "set_headers", "remove_headers", "body"]
    static let bodyKeys = ["replace", "json", "file"]
    static let replaceKeys = ["regex", "text", "with"]
    static let jsonKeys = ["set", "remove"]
    static let respondKeys = ["status", "headers", "body", "body_file"]
    static let redirectClientKeys = ["status", "location"]
    static let mapRemoteKeys = ["to"]
    static let throttleKeys = ["down_kbps", "up_kbps", "latency_ms"]

    struct Parsed {
        var rule: Rule
        var nameNode: YAMLNode
    }

    func parseFile(_ root: YAMLNode) -> [Parsed] {
        guard let top = ctx.mapping(root, "top level", allowed: Self.topKeys) else { return [] }
        guard let rulesNode = top["rules"] else {
            ctx.error(root, "a rule file holds a top-level 'rules:' list")
            return []
        }
        if case .scalar(let scalar) = rulesNode, scalar.string.isEmpty || scalar.string == "~" || scalar.string == "null" {
            return []  // `rules:` with every rule commented out
        }
        guard case .sequence(let items) = rulesNode else {
            ctx.error(rulesNode, "'rules' must be a list of rules (each starting with '- name:'), found \(FileContext.describe(rulesNode))")
            return []
        }
        var parsed: [Parsed] = []
        for item in items {
            if let rule = parseRule(item) { parsed.append(rule) }
        }
        return parsed
    }

    // MARK: rule

    func parseRule(_ node: YAMLNode) -> Parsed? {
        let errorsBefore = ctx.errors.count
        guard let map = ctx.mapping(node, "rule", allowed: Self.ruleKeys) else { return nil }
        guard let nameNode = map["name"] else {
            ctx.error(node, "rule has no 'name' (every rule needs a unique name)")
            return nil
        }
        guard let name = ctx.nonEmptyString(nameNode, "name") else { return nil }
        var rule = Rule(name: name, file: ctx.file, line: node.mark.line, match: RuleMatch())

        var groupCount: Int?  // nil: no path_regex
        if let matchNode = map["match"] {
            if let (match, groups) = parseMatch(matchNode) {
                rule.match = match
                groupCount = groups
            }
        }

        let targetKeys = map.entries.map(\.key).filter { ["map_remote", "respond", "redirect_client"].contains($0) }
        if targetKeys.count > 1 {
            ctx.error(map.keyNode(targetKeys[1]),
                      "'\(targetKeys[0])' and '\(targetKeys[1])' exclude each other in one rule (split it into two rules)")
        }
        if let node = map["map_remote"] {
            rule.target = parseMapRemote(node, groups: groupCount).map { .mapRemote($0) }
        }
        if let node = map["respond"] {
            rule.target = parseRespond(node).map { .respond($0) }
        }
        if let node = map["redirect_client"] {
            rule.target = parseRedirectClient(node, groups: groupCount).map { .redirectClient($0) }
        }
        if let node = map["request"], let edits = parseEdits(node, "request", keys: Self.requestKeys, rule: name, groups: groupCount) {
            rule.requestEdit = edits.0
            rule.requestBody = edits.1
        }
        if let node = map["response"], let edits = parseEdits(node, "response", keys: Self.responseKeys, rule: name, groups: groupCount) {
            rule.responseEdit = edits.0
            rule.responseBody = edits.1
        }
        if let node = map["delay_ms"] {
            rule.delayMs = ctx.int(node, "delay_ms", range: 0...600_000)
        }
        if let node = map["throttle"] { rule.throttle = parseThrottle(node) }
        if let node = map["websocket"], let sides = ctx.mapping(node, "websocket", allowed: Self.webSocketKeys) {
            if sides.entries.isEmpty { ctx.error(node, "'websocket' needs to_server, to_client or both") }
            if let node = sides["to_server"] { rule.webSocketToServer = parseBody(node, "websocket.to_server", rule: name) }
            if let node = sides["to_client"] { rule.webSocketToClient = parseBody(node, "websocket.to_client", rule: name) }
        }
        if let node = map["on_redirect"] { rule.onRedirect = HookParser(ctx: ctx).onRedirect(node, rule: name) }
        if let node = map["on_challenge"] { rule.onChallenge = HookParser(ctx: ctx).onChallenge(node, rule: name) }
        if let node = map["trust"] { rule.trust = HookParser(ctx: ctx).trust(node, rule: name) }
        if let node = map["intercept"] { rule.intercept = ctx.bool(node, "intercept") }

        guard ctx.errors.count == errorsBefore else { return nil }
        return Parsed(rule: rule, nameNode: nameNode)
    }
}
