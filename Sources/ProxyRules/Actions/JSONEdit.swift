/// A path into a JSON document: `a.b[0].c`, `[2].id`, `items[0][1]`.
struct JSONPath: Sendable, Hashable, CustomStringConvertible {
    enum Step: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    let source: String
    let steps: [Step]
    var description: String { source }

    static func parse(_ source: String) -> Result<JSONPath, JSONPathError> {
        var steps: [Step] = []
        var chars = source[...]
        var expectKey = true
        while !chars.isEmpty {
            if chars.first == "[" {
                guard let close = chars.firstIndex(of: "]"), let index = Int(chars[chars.index(after: chars.startIndex)..<close]),
                      index >= 0 else {
                    return .failure(JSONPathError(reason: "'[' must hold an index like [0]"))
                }
                steps.append(.index(index))
                chars = chars[chars.index(after: close)...]
                expectKey = false
            } else if chars.first == "." {
                guard !steps.isEmpty else { return .failure(JSONPathError(reason: "a path cannot start with '.'")) }
                chars = chars.dropFirst()
                expectKey = true
                guard let next = chars.first, next != ".", next != "[" else {
                    return .failure(JSONPathError(reason: "an empty name after '.'"))
                }
            } else {
                guard expectKey else { return .failure(JSONPathError(reason: "expected '.' or '[' after ']'")) }
                let name = chars.prefix { $0 != "." && $0 != "[" && $0 != "]" }
                guard !name.isEmpty else { return .failure(JSONPathError(reason: "unexpected ']'")) }
                steps.append(.key(String(name)))
                chars = chars.dropFirst(name.count)
                expectKey = false
            }
        }
        guard !steps.isEmpty else { return .failure(JSONPathError(reason: "an empty path")) }
        return .success(JSONPath(source: source, steps: steps))
    }
}

struct JSONPathError: Error {
    var reason: String
}

/// `json: {set: {...}, remove: [...]}` of one rule.
struct JSONEdit: Sendable {
    var set: [(path: JSONPath, value: JSONValue)] = []
    var remove: [JSONPath] = []

    /// Applies every set then every remove. Any impossible path leaves the document unchanged; the reason is
    /// returned as a note.
    func apply(to document: JSONValue) -> (JSONValue, [String]) {
        var result = document
        var notes: [String] = []
        for (path, value) in set {
            switch JSONEdit.setting(value, at: path.steps[...], in: result) {
            case .success(let updated): result = updated
            case .failure(let failure):
                return (document, ["json.set \(path): \(failure.reason); body unchanged"])
            }
        }
        for path in remove {
            switch JSONEdit.removing(at: path.steps[...], in: result) {
            case .success(let updated): result = updated
            case .failure(let failure):
                notes.append("json.remove \(path): \(failure.reason)")
            }
        }
        return (result, notes)
    }

    private static func setting(_ value: JSONValue, at steps: ArraySlice<JSONPath.Step>, in node: JSONValue?)
        -> Result<JSONValue, JSONPathError> {
        guard let step = steps.first else { return .success(value) }
        let rest = steps.dropFirst()
        switch (step, node) {
        case (.key(let key), .object(var members)?):
            if let at = members.firstIndex(where: { $0.key == key }) {
                switch setting(value, at: rest, in: members[at].value) {
                case .success(let child): members[at].value = child
                case .failure(let error): return .failure(error)
                }
            } else {
                switch setting(value, at: rest, in: rest.isEmpty ? nil : .object([])) {
                case .success(let child): members.append((key, child))
                case .failure(let error): return .failure(error)
                }
            }
            return .success(.object(members))
        case (.key(let key), .some(let other)):
            return .failure(JSONPathError(reason: "cannot set key '\(key)' on \(kind(other))"))
        case (.index(let index), .array(var items)?):
            guard index < items.count else {
                return .failure(JSONPathError(reason: "index \(index) is past the end of an array of \(items.count)"))
            }
            switch setting(value, at: rest, in: items[index]) {
            case .success(let child): items[index] = child
            case .failure(let error): return .failure(error)
            }
            return .success(.array(items))
        case (.index(let index), .some(let other)):
            return .failure(JSONPathError(reason: "cannot index [\(index)] into \(kind(other))"))
        case (_, nil):
            return .failure(JSONPathError(reason: "no array to index"))
        }
    }

    private static func removing(at steps: ArraySlice<JSONPath.Step>, in node: JSONValue)
        -> Result<JSONValue, JSONPathError> {
        guard let step = steps.first else { return .success(node) }
        let rest = steps.dropFirst()
        switch (step, node) {
        case (.key(let key), .object(var members)):
            guard let at = members.firstIndex(where: { $0.key == key }) else {
                return .failure(JSONPathError(reason: "nothing to remove (no key '\(key)')"))
            }
            if rest.isEmpty {
                members.remove(at: at)
            } else {
                switch removing(at: rest, in: members[at].value) {
                case .success(let child): members[at].value = child
                case .failure(let error): return .failure(error)
                }
            }
            return .success(.object(members))
        case (.index(let index), .array(var items)):
            guard index < items.count else {
                return .failure(JSONPathError(reason: "nothing to remove (index \(index) of an array of \(items.count))"))
            }
            if rest.isEmpty {
                items.remove(at: index)
            } else {
                switch removing(at: rest, in: items[index]) {
                case .success(let child): items[index] = child
                case .failure(let error): return .failure(error)
                }
            }
            return .success(.array(items))
        default:
            return .failure(JSONPathError(reason: "nothing to remove (\(kind(node)) on the way)"))
        }
    }

    private static func kind(_ value: JSONValue) -> String {
        switch value {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        }
    }
}
