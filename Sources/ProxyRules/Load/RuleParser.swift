import Foundation
import ProxyModel
import Yams

/// Turns the YAML of one file into compiled rules, reporting every problem to the FileContext.
/// A rule with any error is dropped (the whole load then fails, so nothing is half-applied).
struct RuleParser {
    let ctx: FileContext

    static let topKeys = ["rules"]
    static let ruleKeys = ["name", "match", "map_remote", "respond", "redirect_client", "request", "response",
                           "delay_ms", "on_redirect", "on_challenge", "trust", "intercept"]
    static let matchKeys = ["host", "scheme", "port", "method", "path", "path_regex", "query", "header"]
    static let requestKeys = ["set_headers", "remove_headers", "body"]
    static let responseKeys = ["status", "set_headers", "remove_headers", "body"]
    static let bodyKeys = ["replace", "json", "file"]
    static let replaceKeys = ["regex", "text", "with"]
    static let jsonKeys = ["set", "remove"]
    static let respondKeys = ["status", "headers", "body", "body_file"]
    static let redirectClientKeys = ["status", "location"]
    static let mapRemoteKeys = ["to"]

    struct Parsed {
        var rule: Rule
        var nameNode: Node
    }

    func parseFile(_ root: Node) -> [Parsed] {
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

    func parseRule(_ node: Node) -> Parsed? {
        let errorsBefore = ctx.errors.count
        guard let map = ctx.mapping(node, "rule", allowed: Self.ruleKeys) else { return nil }
        guard let nameNode = map["name"] else {
            ctx.error(node, "rule has no 'name' (every rule needs a unique name)")
            return nil
        }
        guard let name = ctx.nonEmptyString(nameNode, "name") else { return nil }
        var rule = Rule(name: name, file: ctx.file, line: node.mark?.line ?? 1, match: RuleMatch())

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
        if let node = map["on_redirect"] { rule.onRedirect = HookParser(ctx: ctx).onRedirect(node, rule: name) }
        if let node = map["on_challenge"] { rule.onChallenge = HookParser(ctx: ctx).onChallenge(node, rule: name) }
        if let node = map["trust"] { rule.trust = HookParser(ctx: ctx).trust(node, rule: name) }
        if let node = map["intercept"] { rule.intercept = ctx.bool(node, "intercept") }

        guard ctx.errors.count == errorsBefore else { return nil }
        return Parsed(rule: rule, nameNode: nameNode)
    }

    // MARK: match

    /// The compiled match and the number of `path_regex` groups (nil without a path_regex).
    func parseMatch(_ node: Node) -> (RuleMatch, Int?)? {
        guard let map = ctx.mapping(node, "match", allowed: Self.matchKeys) else { return nil }
        var match = RuleMatch()
        var groups: Int?
        if let node = map["host"], let hosts = ctx.stringList(node, "match.host") {
            for (host, hostNode) in hosts {
                if host.contains("/") {
                    ctx.error(hostNode, "bad host glob '\(host)': a host glob holds a host name only (match the path with 'path')")
                    continue
                }
                if host.filter({ $0 == ":" }).count == 1 {
                    ctx.error(hostNode, "bad host glob '\(host)': put the port in 'port', not in 'host'")
                    continue
                }
                switch Glob.compile(host, caseInsensitive: true) {
                case .success(let glob): match.hosts.append(glob)
                case .failure(let failure): ctx.error(hostNode, "bad host glob '\(host)': \(failure.reason)")
                }
            }
        }
        if let node = map["scheme"], let schemes = ctx.stringList(node, "match.scheme") {
            for (scheme, schemeNode) in schemes {
                let lowered = scheme.lowercased()
                if lowered == "http" || lowered == "https" { match.schemes.append(lowered) }
                else { ctx.error(schemeNode, "'match.scheme' must be http or https, found '\(scheme)'") }
            }
        }
        if let node = map["port"] {
            let items: [Node] = if case .sequence(let seq) = node { Array(seq) } else { [node] }
            for item in items {
                if let port = ctx.int(item, "match.port", range: 1...65535) { match.ports.append(port) }
            }
        }
        if let node = map["method"], let methods = ctx.stringList(node, "match.method") {
            for (method, methodNode) in methods {
                guard !method.isEmpty, method.utf8.allSatisfy(HeaderValidation.isTokenByte) else {
                    ctx.error(methodNode, "'\(method)' is not an HTTP method")
                    continue
                }
                if method != method.uppercased() {
                    ctx.warning(methodNode, "methods match case-sensitively: '\(method)' does not match '\(method.uppercased())'")
                }
                match.methods.append(method)
            }
        }
        if map.has("path") && map.has("path_regex") {
            ctx.error(map.keyNode("path_regex"), "'path' and 'path_regex' exclude each other; use one")
        }
        if let node = map["path"], let path = ctx.string(node, "match.path") {
            if !(path.hasPrefix("/") || path.hasPrefix("*") || path.hasPrefix("?")) {
                ctx.error(node, "bad path glob '\(path)': a path starts with '/' (the query is matched with 'query')")
            } else if path.contains("?") && path.contains("=") {
                ctx.error(node, "bad path glob '\(path)': the path is matched without its query; use 'query: {name: value}'")
            } else {
                switch Glob.compile(path, caseInsensitive: false) {
                case .success(let glob): match.path = glob
                case .failure(let failure): ctx.error(node, "bad path glob '\(path)': \(failure.reason)")
                }
            }
        }
        if let node = map["path_regex"], let pattern = ctx.string(node, "match.path_regex") {
            switch CompiledRegex.compile(pattern) {
            case .success(let regex):
                match.pathRegex = regex
                groups = regex.groupCount
            case .failure(let failure): ctx.error(node, "bad regex '\(pattern)': \(failure.reason)")
            }
        }
        if let node = map["query"], let pairs = ctx.stringMap(node, "match.query") {
            for pair in pairs {
                switch Glob.compile(pair.value, caseInsensitive: false) {
                case .success(let glob): match.query.append((pair.key, glob))
                case .failure(let failure):
                    if pair.value.isEmpty { match.query.append((pair.key, Glob.emptyValue)) }
                    else { ctx.error(pair.valueNode, "bad glob '\(pair.value)': \(failure.reason)") }
                }
            }
        }
        if let node = map["header"], let pairs = ctx.stringMap(node, "match.header") {
            for pair in pairs {
                guard HeaderValidation.isName(pair.key) else {
                    ctx.error(pair.keyNode, "'\(pair.key)' is not a valid header name")
                    continue
                }
                switch Glob.compile(pair.value, caseInsensitive: false) {
                case .success(let glob): match.headers.append((pair.key, glob))
                case .failure(let failure):
                    if pair.value.isEmpty { match.headers.append((pair.key, Glob.emptyValue)) }
                    else { ctx.error(pair.valueNode, "bad glob '\(pair.value)': \(failure.reason)") }
                }
            }
        }
        return (match, groups)
    }

    // MARK: actions

    /// Parses a template and checks its `$N` against the rule's `path_regex`.
    func template(_ node: Node, _ what: String, groups: Int?) -> URLTemplate? {
        guard let text = ctx.nonEmptyString(node, what) else { return nil }
        let template: URLTemplate
        switch URLTemplate.parse(text) {
        case .success(let parsed): template = parsed
        case .failure(let failure):
            ctx.error(node, "bad template '\(text)' in '\(what)': \(failure.reason)")
            return nil
        }
        guard checkGroups(template.maxGroup, node: node, what: what, groups: groups) else { return nil }
        return template
    }

    func checkGroups(_ used: Int?, node: Node, what: String, groups: Int?) -> Bool {
        guard let used, used > 0 else { return true }
        guard let groups else {
            ctx.error(node, "'\(what)' uses $\(used) but the rule has no 'match.path_regex' to capture it")
            return false
        }
        if used > groups {
            ctx.error(node, "'\(what)' uses $\(used) but match.path_regex has only \(groups) group\(groups == 1 ? "" : "s")")
            return false
        }
        return true
    }

    func parseMapRemote(_ node: Node, groups: Int?) -> MapRemote? {
        // `map_remote: "http://…"` is accepted as a short form of `map_remote: {to: …}`.
        let toNode: Node
        if case .scalar = node { toNode = node } else {
            guard let map = ctx.mapping(node, "map_remote", allowed: Self.mapRemoteKeys) else { return nil }
            guard let to = map["to"] else {
                ctx.error(node, "'map_remote' needs 'to' (a URL template)")
                return nil
            }
            toNode = to
        }
        guard let template = template(toNode, "map_remote.to", groups: groups) else { return nil }
        let source = template.source
        if template.isLiteral {
            guard ProxyURL(string: source) != nil else {
                ctx.error(toNode, "'map_remote.to' must be an http:// or https:// URL, found '\(source)'")
                return nil
            }
        } else if !(source.hasPrefix("http://") || source.hasPrefix("https://") || source.hasPrefix("{scheme}://")
                    || source.hasPrefix("{url}")) {
            ctx.error(toNode, "'map_remote.to' must start with http://, https://, {scheme}:// or {url}, found '\(source)'")
            return nil
        }
        return MapRemote(to: template)
    }

    func status(_ node: Node?, _ what: String, default value: Int, range: ClosedRange<Int> = 100...599) -> Int? {
        guard let node else { return value }
        return ctx.int(node, what, range: range)
    }

    func parseRespond(_ node: Node) -> Respond? {
        guard let map = ctx.mapping(node, "respond", allowed: Self.respondKeys) else { return nil }
        let before = ctx.errors.count
        let status = status(map["status"], "respond.status", default: 200)
        var headers = HeaderFields()
        if let node = map["headers"], let pairs = headerPairs(node, "respond.headers") {
            for pair in pairs { headers.add(pair.name, pair.value) }
        }
        var body: [UInt8] = []
        var bodyFile: String?
        if map.has("body") && map.has("body_file") {
            ctx.error(map.keyNode("body_file"), "'body' and 'body_file' exclude each other in 'respond'; use one")
        } else if let node = map["body"], let text = ctx.string(node, "respond.body") {
            body = Array(text.utf8)
            if !headers.contains("Content-Type") { headers.add("Content-Type", "text/plain; charset=utf-8") }
        } else if let node = map["body_file"], let path = ctx.nonEmptyString(node, "respond.body_file") {
            if let bytes = ctx.readReferencedFile(path, key: "body_file", node: node) {
                body = bytes
                bodyFile = path
                if !headers.contains("Content-Type") { headers.add("Content-Type", MediaType.guess(forPath: path)) }
            }
        }
        guard ctx.errors.count == before, let status else { return nil }
        headers.set("Content-Length", String(body.count))
        return Respond(status: status, headers: headers, body: body, bodyFile: bodyFile)
    }

    func parseRedirectClient(_ node: Node, groups: Int?) -> RedirectClient? {
        guard let map = ctx.mapping(node, "redirect_client", allowed: Self.redirectClientKeys) else { return nil }
        guard let locationNode = map["location"] else {
            ctx.error(node, "'redirect_client' needs 'location' (a URL template)")
            return nil
        }
        let status = status(map["status"], "redirect_client.status", default: 302, range: 300...399)
        guard let location = template(locationNode, "redirect_client.location", groups: groups), let status else {
            return nil
        }
        guard HeaderValidation.isValue(location.source) else {
            ctx.error(locationNode, "'redirect_client.location' holds a line break or control character")
            return nil
        }
        return RedirectClient(status: status, location: location)
    }

    func headerPairs(_ node: Node, _ what: String) -> [HeaderField]? {
        guard let pairs = ctx.stringMap(node, what) else { return nil }
        var result: [HeaderField] = []
        for pair in pairs {
            guard HeaderValidation.isName(pair.key) else {
                ctx.error(pair.keyNode, "'\(pair.key)' is not a valid header name")
                continue
            }
            guard HeaderValidation.isValue(pair.value) else {
                ctx.error(pair.valueNode, "the value of header '\(pair.key)' holds a line break or control character")
                continue
            }
            result.append(HeaderField(name: pair.key, value: pair.value))
        }
        return result
    }

    func parseEdits(_ node: Node, _ what: String, keys: [String], rule: String, groups: Int?)
        -> (HeaderEdit?, BodyTransformStep?)? {
        guard let map = ctx.mapping(node, what, allowed: keys) else { return nil }
        var edit = HeaderEdit()
        if let node = map["set_headers"], let pairs = headerPairs(node, "\(what).set_headers") { edit.set = pairs }
        if let node = map["remove_headers"], let names = ctx.stringList(node, "\(what).remove_headers") {
            for (name, nameNode) in names {
                if HeaderValidation.isName(name) { edit.remove.append(name) }
                else { ctx.error(nameNode, "'\(name)' is not a valid header name") }
            }
        }
        if let node = map["status"] { edit.status = ctx.int(node, "\(what).status", range: 100...599) }
        var step: BodyTransformStep?
        if let node = map["body"] { step = parseBody(node, "\(what).body", rule: rule) }
        let hasHeaderEdit = !edit.set.isEmpty || !edit.remove.isEmpty || edit.status != nil
        return (hasHeaderEdit ? edit : nil, step)
    }

    func parseBody(_ node: Node, _ what: String, rule: String) -> BodyTransformStep? {
        guard let map = ctx.mapping(node, what, allowed: Self.bodyKeys) else { return nil }
        var step = BodyTransformStep(rule: rule)
        if let node = map["file"], let path = ctx.nonEmptyString(node, "\(what).file") {
            if let bytes = ctx.readReferencedFile(path, key: "file", node: node) { step.file = (bytes, path) }
        }
        if let node = map["replace"] {
            let items: [Node]
            switch node {
            case .sequence(let seq): items = Array(seq)
            case .mapping: items = [node]
            default:
                ctx.error(node, "'\(what).replace' must be a list of {regex, with} or {text, with}, found \(FileContext.describe(node))")
                items = []
            }
            for item in items {
                if let replacement = parseReplacement(item, "\(what).replace") { step.replacements.append(replacement) }
            }
        }
        if let node = map["json"] { step.json = parseJSONEdit(node, "\(what).json") }
        return step
    }

    func parseReplacement(_ node: Node, _ what: String) -> Replacement? {
        guard let map = ctx.mapping(node, what, allowed: Self.replaceKeys) else { return nil }
        guard let withNode = map["with"] else {
            ctx.error(node, "each '\(what)' item needs 'with' (the replacement text; may be empty)")
            return nil
        }
        guard let with = ctx.string(withNode, "\(what).with") else { return nil }
        switch (map["regex"], map["text"]) {
        case (.some, .some):
            ctx.error(map.keyNode("text"), "'regex' and 'text' exclude each other in one '\(what)' item")
            return nil
        case (nil, nil):
            ctx.error(node, "each '\(what)' item needs 'regex' or 'text'")
            return nil
        case (let regexNode?, nil):
            guard let pattern = ctx.nonEmptyString(regexNode, "\(what).regex") else { return nil }
            switch CompiledRegex.compile(pattern) {
            case .success(let regex):
                let used = Replacement.maxGroupReference(in: with)
                if let used, used > regex.groupCount {
                    ctx.error(withNode, "'with' uses $\(used) but the regex has only \(regex.groupCount) group\(regex.groupCount == 1 ? "" : "s")")
                    return nil
                }
                return Replacement(pattern: .regex(regex), with: with)
            case .failure(let failure):
                ctx.error(regexNode, "bad regex '\(pattern)': \(failure.reason)")
                return nil
            }
        case (nil, let textNode?):
            guard let text = ctx.nonEmptyString(textNode, "\(what).text") else { return nil }
            return Replacement(pattern: .text(text), with: with)
        }
    }

    func parseJSONEdit(_ node: Node, _ what: String) -> JSONEdit? {
        guard let map = ctx.mapping(node, what, allowed: Self.jsonKeys) else { return nil }
        var edit = JSONEdit()
        if let node = map["set"], let set = ctx.mapping(node, "\(what).set", allowed: []) {
            for entry in set.entries {
                switch JSONPath.parse(entry.key) {
                case .success(let path):
                    if let value = jsonValue(entry.value) { edit.set.append((path, value)) }
                case .failure(let failure):
                    ctx.error(entry.keyNode, "bad JSON path '\(entry.key)': \(failure.reason)")
                }
            }
        }
        if let node = map["remove"], let paths = ctx.stringList(node, "\(what).remove") {
            for (text, pathNode) in paths {
                switch JSONPath.parse(text) {
                case .success(let path): edit.remove.append(path)
                case .failure(let failure): ctx.error(pathNode, "bad JSON path '\(text)': \(failure.reason)")
                }
            }
        }
        return edit
    }

    /// A YAML value as JSON: quoted scalars are strings; plain ones become numbers, booleans and null when they
    /// read as such.
    func jsonValue(_ node: Node) -> JSONValue? {
        ctx.nodeBudget -= 1
        if ctx.nodeBudget < 0 {
            if ctx.nodeBudget == -1 { ctx.error(node, "value too large (alias expansion?)") }
            return nil
        }
        switch node {
        case .scalar(let scalar):
            guard let text = ctx.expandEnvironment(scalar.string, node: node) else { return nil }
            guard scalar.style == .plain else { return .string(text) }
            switch text {
            case "true", "True", "TRUE": return .bool(true)
            case "false", "False", "FALSE": return .bool(false)
            case "", "~", "null", "Null", "NULL": return .null
            default:
                if let number = try? JSONValue.parse(Array(text.utf8)), case .number = number { return number }
                return .string(text)
            }
        case .mapping(let mapping):
            var members: [(key: String, value: JSONValue)] = []
            for (key, value) in mapping {
                guard case .scalar(let keyScalar) = key else {
                    ctx.error(key, "JSON object keys must be text")
                    return nil
                }
                guard let child = jsonValue(value) else { return nil }
                members.append((keyScalar.string, child))
            }
            return .object(members)
        case .sequence(let sequence):
            var items: [JSONValue] = []
            for item in sequence {
                guard let child = jsonValue(item) else { return nil }
                items.append(child)
            }
            return .array(items)
        case .alias:
            ctx.error(node, "unexpected alias")
            return nil
        }
    }
}

extension Replacement {
    /// Largest `$N` in a replacement template (`\$` escapes), or nil.
    static func maxGroupReference(in template: String) -> Int? {
        var result: Int?
        var chars = template[...]
        while let char = chars.popFirst() {
            if char == "\\" { _ = chars.popFirst(); continue }
            guard char == "$" else { continue }
            let digits = chars.prefix { $0.isASCII && $0.isNumber }
            if let number = Int(digits.prefix(3)) { result = max(result ?? 0, number) }
        }
        return result
    }
}

/// RFC 9110 token and field-value checks.
enum HeaderValidation {
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    static func isName(_ name: String) -> Bool { !name.isEmpty && name.utf8.allSatisfy(isTokenByte) }

    static func isValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}
