import FoundationEssentials
import ProxyModel

extension RuleParser {
    // MARK: edits and body transforms

    func parseEdits(_ node: YAMLNode, _ what: String, keys: [String], rule: String, groups: Int?)
        -> (HeaderEdit?, BodyTransformStep?)? {
        guard let map = ctx.mapping(node, what, allowed: keys) else { return nil }
        var edit = HeaderEdit()
        if let node = map["set_headers"], let pairs = headerPairs(node, "\(what).set_headers") {
            edit.set = pairs
            edit.secretValues = environmentValues(node, pairs)
        }
        if let node = map["remove_headers"], let names = ctx.stringList(node, "\(what).remove_headers") {
            for (name, nameNode) in names {
                if HTTPToken.isToken(name) { edit.remove.append(name) }
                else { ctx.error(nameNode, "'\(name)' is not a valid header name") }
            }
        }
        if let node = map["status"] { edit.status = ctx.int(node, "\(what).status", range: 100...599) }
        var step: BodyTransformStep?
        if let node = map["body"] { step = parseBody(node, "\(what).body", rule: rule) }
        let hasHeaderEdit = !edit.set.isEmpty || !edit.remove.isEmpty || edit.status != nil
        return (hasHeaderEdit ? edit : nil, step)
    }

    /// The values of `pairs` (parsed from the mapping `node`) that `${VAR}` filled from the environment: secrets
    /// the logs must not show.
    func environmentValues(_ node: YAMLNode, _ pairs: [HeaderField]) -> [String] {
        guard case .mapping(let mapping) = node else { return [] }
        var values: [String] = []
        for (key, value) in mapping {
            guard case .scalar(let raw) = value, raw.string.contains("${"),
                  let set = pairs.last(where: { $0.name == key.string }), set.value != raw.string, !set.value.isEmpty
            else { continue }
            values.append(set.value)
        }
        return values
    }

    func parseBody(_ node: YAMLNode, _ what: String, rule: String) -> BodyTransformStep? {
        guard let map = ctx.mapping(node, what, allowed: Self.bodyKeys) else { return nil }
        var step = BodyTransformStep(rule: rule)
        if let node = map["file"], let path = ctx.nonEmptyString(node, "\(what).file") {
            if let bytes = ctx.readReferencedFile(path, key: "file", node: node) { step.file = (bytes, path) }
        }
        if let node = map["replace"] {
            let items: [YAMLNode]
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

    func parseReplacement(_ node: YAMLNode, _ what: String) -> Replacement? {
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
                return Replacement(pattern: .regex(regex, ReplacementTemplate(with, groupCount: regex.groupCount)), with: with)
            case .failure(let failure):
                ctx.error(regexNode, "bad regex '\(pattern)': \(failure.reason)")
                return nil
            }
        case (nil, let textNode?):
            guard let text = ctx.nonEmptyString(textNode, "\(what).text") else { return nil }
            return Replacement(pattern: .text(text), with: with)
        }
    }

    func parseJSONEdit(_ node: YAMLNode, _ what: String) -> JSONEdit? {
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
    func jsonValue(_ node: YAMLNode) -> JSONValue? {
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

/// RFC 9110 field-value check (tokens: `HTTPToken`).
enum HeaderValidation {
    static func isValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}
