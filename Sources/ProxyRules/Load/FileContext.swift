import FoundationEssentials
import ProxyModel

/// Reading state of one rule file: where it is, the errors and warnings found so far, and typed accessors over
/// YAML nodes that report wrong types at the node's `line:column`. Used by one loading thread only.
final class FileContext {
    /// The path as shown in messages.
    let file: String
    /// The directory that relative paths in the file are resolved against.
    let directory: String
    let environment: [String: String]
    private(set) var errors: [RuleError] = []
    private(set) var warnings: [RuleWarning] = []
    /// Files the rules read (mocks, certificates), watched for hot reload.
    private(set) var dependencies: [String] = []
    /// Bound on nodes visited while converting free-form YAML (json.set values), against alias bombs.
    var nodeBudget = 200_000

    init(file: String, directory: String, environment: [String: String]) {
        self.file = file
        self.directory = directory
        self.environment = environment
    }

    var hasErrors: Bool { !errors.isEmpty }

    func error(_ node: YAMLNode?, _ message: String) {
        error(at: node?.mark, message)
    }

    func error(at mark: YAMLMark?, _ message: String) {
        errors.append(RuleError(file: file, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message))
    }

    func error(line: Int, column: Int, _ message: String) {
        errors.append(RuleError(file: file, line: line, column: column, message: message))
    }

    func warning(_ node: YAMLNode?, _ message: String) {
        let mark = node?.mark
        warnings.append(RuleWarning(file: file, line: mark?.line ?? 1, column: mark?.column ?? 1, message: message))
    }

    func addDependency(_ path: String) { dependencies.append(path) }

    // MARK: paths

    /// `path` resolved against the rule file's directory (absolute paths stay as they are).
    func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        if path.hasPrefix("~/") { return PathText.expandingTilde(path) }
        return PathText.appending(path, to: directory)
    }

    /// Reads a referenced file (body_file, file, certificates), reporting a missing or unreadable one at `node`.
    func readReferencedFile(_ path: String, key: String, node: YAMLNode, limit: Int = 64 << 20) -> [UInt8]? {
        let full = resolve(path)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) else {
            error(node, "\(key) '\(path)' not found (looked for \(full))")
            return nil
        }
        guard !isDirectory else {
            error(node, "\(key) '\(path)' is a directory, not a file")
            return nil
        }
        addDependency(full)
        guard let data = FileManager.default.contents(atPath: full) else {
            error(node, "\(key) '\(path)' cannot be read")
            return nil
        }
        guard data.count <= limit else {
            error(node, "\(key) '\(path)' is \(data.count) bytes; the limit is \(limit)")
            return nil
        }
        return [UInt8](data)
    }

    // MARK: typed accessors

    static func describe(_ node: YAMLNode) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .scalar(let scalar):
            if scalar.style == .plain && (scalar.string.isEmpty || scalar.string == "~" || scalar.string == "null") {
                return "nothing"
            }
            let text = scalar.string.count > 40 ? String(scalar.string.prefix(40)) + "…" : scalar.string
            return "'\(text)'"
        }
    }

    /// A mapping whose keys are checked against `allowed` (unknown keys are errors with the nearest valid key).
    func mapping(_ node: YAMLNode, _ what: String, allowed: [String]) -> MappingReader? {
        guard case .mapping(let mapping) = node else {
            error(node, "'\(what)' must be a mapping, found \(Self.describe(node))")
            return nil
        }
        var entries: [MappingReader.Entry] = []
        for (keyNode, value) in mapping {
            guard case .scalar(let key) = keyNode else {
                error(keyNode, "keys of '\(what)' must be plain names, found \(Self.describe(keyNode))")
                continue
            }
            if !allowed.isEmpty && !allowed.contains(key.string) {
                var message = "unknown key '\(key.string)' in '\(what)'"
                if let near = Suggest.nearest(to: key.string, in: allowed) { message += " — did you mean '\(near)'?" }
                else { message += " (valid keys: \(allowed.joined(separator: ", ")))" }
                error(keyNode, message)
                continue
            }
            entries.append(.init(key: key.string, keyNode: keyNode, value: value))
        }
        return MappingReader(node: node, entries: entries)
    }

    /// A string scalar with `${VAR}` expanded. Reports an unset variable naming it.
    func string(_ node: YAMLNode, _ what: String, expand: Bool = true) -> String? {
        guard case .scalar(let scalar) = node else {
            error(node, "'\(what)' must be a text value, found \(Self.describe(node))")
            return nil
        }
        if scalar.style == .plain && (scalar.string == "~" || scalar.string == "null") { return "" }
        return expand ? expandEnvironment(scalar.string, node: node) : scalar.string
    }

    func nonEmptyString(_ node: YAMLNode, _ what: String) -> String? {
        guard let value = string(node, what) else { return nil }
        if value.isEmpty {
            error(node, "'\(what)' must not be empty")
            return nil
        }
        return value
    }

    func int(_ node: YAMLNode, _ what: String, range: ClosedRange<Int>) -> Int? {
        guard case .scalar(let scalar) = node, let value = Int(expandEnvironment(scalar.string, node: node) ?? "")
        else {
            error(node, "'\(what)' must be a whole number, found \(Self.describe(node))")
            return nil
        }
        guard range.contains(value) else {
            error(node, "'\(what)' must be between \(range.lowerBound) and \(range.upperBound), found \(value)")
            return nil
        }
        return value
    }

    func bool(_ node: YAMLNode, _ what: String) -> Bool? {
        if case .scalar(let scalar) = node {
            switch scalar.string.lowercased() {
            case "true": return true
            case "false": return false
            default: break
            }
        }
        error(node, "'\(what)' must be true or false, found \(Self.describe(node))")
        return nil
    }

    /// One text value or a list of them; each with its node for later messages.
    func stringList(_ node: YAMLNode, _ what: String) -> [(String, YAMLNode)]? {
        switch node {
        case .scalar:
            return string(node, what).map { [($0, node)] }
        case .sequence(let sequence):
            var result: [(String, YAMLNode)] = []
            var ok = true
            for item in sequence {
                if let value = string(item, what) { result.append((value, item)) } else { ok = false }
            }
            return ok ? result : nil
        default:
            error(node, "'\(what)' must be a text value or a list of them, found \(Self.describe(node))")
            return nil
        }
    }

    /// A mapping of name → text (headers, query); keys keep their spelling and order.
    func stringMap(_ node: YAMLNode, _ what: String) -> [(key: String, keyNode: YAMLNode, value: String, valueNode: YAMLNode)]? {
        guard let reader = mapping(node, what, allowed: []) else { return nil }
        var result: [(key: String, keyNode: YAMLNode, value: String, valueNode: YAMLNode)] = []
        var ok = true
        for entry in reader.entries {
            if let value = string(entry.value, "\(what).\(entry.key)") {
                result.append((entry.key, entry.keyNode, value, entry.value))
            } else { ok = false }
        }
        return ok ? result : nil
    }

    // MARK: environment

    /// Expands `${VAR}` from the environment. An unset variable is an error naming it; nil then.
    func expandEnvironment(_ text: String, node: YAMLNode) -> String? {
        guard text.contains("${") else { return text }
        var result = ""
        var rest = Substring(text)
        var ok = true
        while let start = rest.firstRange(of: "${") {
            result += rest[..<start.lowerBound]
            let after = rest[start.upperBound...]
            guard let close = after.firstIndex(of: "}") else {
                result += rest[start.lowerBound...]
                rest = ""
                break
            }
            let name = String(after[..<close])
            if name.isEmpty || !name.allSatisfy({ $0 == "_" || $0.isASCII && ($0.isLetter || $0.isNumber) }) {
                result += rest[start.lowerBound...close]
            } else if let value = environment[name] {
                result += value
            } else {
                error(node, "environment variable '\(name)' is not set (used as ${\(name)})")
                ok = false
            }
            rest = after[after.index(after: close)...]
        }
        result += rest
        return ok ? result : nil
    }
}

/// The checked entries of one YAML mapping, in file order.
struct MappingReader {
    struct Entry {
        var key: String
        var keyNode: YAMLNode
        var value: YAMLNode
    }

    var node: YAMLNode
    var entries: [Entry]

    subscript(key: String) -> YAMLNode? { entries.first { $0.key == key }?.value }
    func keyNode(_ key: String) -> YAMLNode? { entries.first { $0.key == key }?.keyNode }
    func has(_ key: String) -> Bool { entries.contains { $0.key == key } }
}

/// "Did you mean" suggestions by edit distance.
enum Suggest {
    static func nearest(to word: String, in candidates: [String]) -> String? {
        let lowered = word.lowercased()
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(lowered, candidate.lowercased())
            if best == nil || distance < best!.1 { best = (candidate, distance) }
        }
        guard let (candidate, distance) = best else { return nil }
        let allowed = max(2, min(word.count, candidate.count) / 2)
        return distance <= allowed ? candidate : nil
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
