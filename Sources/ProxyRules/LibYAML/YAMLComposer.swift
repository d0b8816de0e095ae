/// Composes one YAML text into a `YAMLNode` tree from libyaml's events, as Yams' `compose(yaml:)` did for the
/// rule loader:
/// - an empty text (nothing but comments and blank lines) is nil; a second document is an error at its start;
/// - an alias is the anchored node itself, mark included (so a problem in an aliased value is reported where it
///   is written); an anchor counts from the end of its node (`&a [*a]` is an undefined alias), a later anchor of
///   the same name replaces an earlier one;
/// - a mapping whose keys repeat is an error at the first of the repeated keys (the smallest by text), naming them
///   all. Keys are equal when their texts and tags are (`"1"` and `1` differ: a string and an int; `x` and `'x'`
///   do not). A merge key (`<<`) adds the merged mappings' keys the mapping does not write (`expandingMerges`).
/// Iterative: nesting is bounded by `YAMLEventReader.maxDepth`, not by the stack.
enum YAMLComposer {
    static func compose(_ text: String) throws(YAMLSyntaxError) -> YAMLNode? {
        let reader = YAMLEventReader(text)
        _ = try reader.next()  // stream start
        guard try reader.next().event != .streamEnd else { return nil }  // else the document's start
        let root = try composeNode(reader)
        _ = try reader.next()  // document end
        let after = try reader.next()
        guard after.event == .streamEnd else {
            throw YAMLSyntaxError(stage: .composer, problem: "a second document starts here; a rule file is one YAML document",
                                  mark: after.mark)
        }
        return root
    }

    /// A list or mapping whose end has not been read yet.
    private struct Open {
        enum Content {
            case sequence([YAMLNode])
            case mapping([YAMLNode.Mapping.Element], pendingKey: YAMLNode?)
        }

        var content: Content
        var anchor: String?
        var tag: YAMLTag?
        var mark: YAMLMark

        mutating func append(_ node: YAMLNode) {
            switch content {
            case .sequence(var items):
                content = .sequence([])  // keeps `items` uniquely referenced while it grows
                items.append(node)
                content = .sequence(items)
            case .mapping(var pairs, let key?):
                content = .mapping([], pendingKey: nil)
                pairs.append((key, node))
                content = .mapping(pairs, pendingKey: nil)
            case .mapping(let pairs, nil):
                content = .mapping(pairs, pendingKey: node)
            }
        }
    }

    /// The node whose first event comes next, with everything inside it.
    private static func composeNode(_ reader: YAMLEventReader) throws(YAMLSyntaxError) -> YAMLNode {
        var open: [Open] = []
        var anchors: [String: YAMLNode] = [:]
        while true {
            let (event, mark) = try reader.next()
            let node: YAMLNode
            switch event {
            case .scalar(let text, let anchor, let tag, let style):
                node = .scalar(.init(string: text, style: style, declaredTag: tag, mark: mark))
                if let anchor { anchors[anchor] = node }
            case .alias(let anchor):
                guard let target = anchors[anchor] else {
                    throw YAMLSyntaxError(stage: .composer, problem: "found undefined alias", mark: mark)
                }
                node = target
            case .sequenceStart(let anchor, let tag):
                open.append(Open(content: .sequence([]), anchor: anchor, tag: tag, mark: mark))
                continue
            case .mappingStart(let anchor, let tag):
                open.append(Open(content: .mapping([], pendingKey: nil), anchor: anchor, tag: tag, mark: mark))
                continue
            case .sequenceEnd, .mappingEnd:
                guard let closed = open.popLast() else {
                    throw YAMLSyntaxError(stage: .composer, problem: "unbalanced end of a list or mapping", mark: mark)
                }
                switch closed.content {
                case .sequence(let items):
                    node = .sequence(.init(items: items, declaredTag: closed.tag, mark: closed.mark))
                case .mapping(let pairs, _):
                    try checkDuplicates(pairs)
                    node = .mapping(.init(pairs: try expandingMerges(pairs), declaredTag: closed.tag, mark: closed.mark))
                }
                if let anchor = closed.anchor { anchors[anchor] = node }
            case .streamStart, .streamEnd, .documentStart, .documentEnd:
                throw YAMLSyntaxError(stage: .composer, problem: "a document ended inside a node", mark: mark)
            }
            guard !open.isEmpty else { return node }
            open[open.count - 1].append(node)
        }
    }

    // MARK: merge keys

    /// YAML 1.1's merge key: `<<: *defaults` (or `<<: [*a, *b]`) adds the keys of the merged mappings that the
    /// mapping does not write itself; among several merged mappings the earlier wins. Only a plain `<<` (or one
    /// tagged `!!merge`) merges: a quoted `'<<'` is an ordinary key. The merged values are shared, not copied
    /// (`AliasExpansion` has already bounded how far aliases expand), and keep their marks.
    private static func expandingMerges(_ pairs: [YAMLNode.Mapping.Element]) throws(YAMLSyntaxError) -> [YAMLNode.Mapping.Element] {
        guard pairs.contains(where: { isMergeKey($0.key) }) else { return pairs }
        var result = pairs.filter { !isMergeKey($0.key) }
        var present = Set(result.map { KeyIdentity($0.key) })
        for pair in pairs where isMergeKey(pair.key) {
            let merged: [YAMLNode.Mapping]
            switch pair.value {
            case .mapping(let mapping):
                merged = [mapping]
            case .sequence(let sequence):
                var mappings: [YAMLNode.Mapping] = []
                for item in sequence {
                    guard case .mapping(let mapping) = item else { throw notMergeable(item) }
                    mappings.append(mapping)
                }
                merged = mappings
            case .scalar:
                throw notMergeable(pair.value)
            }
            for mapping in merged {
                for element in mapping.pairs where present.insert(KeyIdentity(element.key)).inserted {
                    result.append(element)
                }
            }
        }
        return result
    }

    private static func isMergeKey(_ key: YAMLNode) -> Bool {
        guard case .scalar(let scalar) = key, scalar.string == "<<" else { return false }
        return scalar.declaredTag == nil ? scalar.style == .plain : scalar.declaredTag == .merge
    }

    private static func notMergeable(_ node: YAMLNode) -> YAMLSyntaxError {
        YAMLSyntaxError(stage: .composer, problem: "a merge key ('<<') takes a mapping or a list of mappings, found \(FileContext.describe(node))",
                        mark: node.mark)
    }

    // MARK: duplicate keys

    private static func checkDuplicates(_ pairs: [YAMLNode.Mapping.Element]) throws(YAMLSyntaxError) {
        guard pairs.count > 1 else { return }
        var firstOfEach: [KeyIdentity: Int] = [:]
        var repeated: [Int] = []  // index of the first occurrence of every key that repeats
        var reported = Set<Int>()
        for (index, pair) in pairs.enumerated() {
            let identity = KeyIdentity(pair.key)
            if let first = firstOfEach[identity] {
                if reported.insert(first).inserted { repeated.append(first) }
            } else {
                firstOfEach[identity] = index
            }
        }
        guard !repeated.isEmpty else { return }
        let keys = repeated.map { pairs[$0].key }.sorted(by: orderedBefore)
        throw YAMLSyntaxError(stage: .composer, problem: "found duplicate keys", mark: keys[0].mark,
                              duplicateKeys: keys.map(keyText))
    }

    /// Scalars by text, before lists and mappings.
    private static func orderedBefore(_ a: YAMLNode, _ b: YAMLNode) -> Bool {
        switch (a.string, b.string) {
        case (let x?, let y?): x < y
        case (.some, nil): true
        default: false
        }
    }

    /// A key as a message shows it: its text, or a list or mapping in flow style, cut at 40 characters.
    private static func keyText(_ key: YAMLNode) -> String {
        var text = ""
        flow(key, into: &text, limit: 41)
        return text.count > 40 ? String(text.prefix(40)) + "…" : text
    }

    private static func flow(_ node: YAMLNode, into text: inout String, limit: Int) {
        switch node {
        case .scalar(let scalar):
            text += scalar.string
        case .sequence(let sequence):
            text += "["
            for (index, item) in sequence.enumerated() {
                guard text.count < limit else { break }
                if index > 0 { text += ", " }
                flow(item, into: &text, limit: limit)
            }
            text += "]"
        case .mapping(let mapping):
            text += "{"
            for (index, pair) in mapping.enumerated() {
                guard text.count < limit else { break }
                if index > 0 { text += ", " }
                flow(pair.key, into: &text, limit: limit)
                text += ": "
                flow(pair.value, into: &text, limit: limit)
            }
            text += "}"
        }
    }
}

/// A mapping key compared as YAML compares keys: scalars by text and resolved tag, lists and mappings by their
/// items (in order) and tag. Marks and styles do not count.
private struct KeyIdentity: Hashable {
    let node: YAMLNode

    init(_ node: YAMLNode) { self.node = node }

    static func == (lhs: KeyIdentity, rhs: KeyIdentity) -> Bool { same(lhs.node, rhs.node) }

    func hash(into hasher: inout Hasher) { Self.hash(node, into: &hasher) }

    private static func same(_ a: YAMLNode, _ b: YAMLNode) -> Bool {
        switch (a, b) {
        case (.scalar(let x), .scalar(let y)):
            return x.string == y.string && x.tag == y.tag
        case (.sequence(let x), .sequence(let y)):
            return x.count == y.count && a.tag == b.tag && zip(x, y).allSatisfy { same($0, $1) }
        case (.mapping(let x), .mapping(let y)):
            return x.count == y.count && a.tag == b.tag
                && zip(x, y).allSatisfy { same($0.key, $1.key) && same($0.value, $1.value) }
        default:
            return false
        }
    }

    private static func hash(_ node: YAMLNode, into hasher: inout Hasher) {
        hasher.combine(node.tag)
        switch node {
        case .scalar(let scalar):
            hasher.combine(scalar.string)
        case .sequence(let sequence):
            hasher.combine(sequence.count)
            for item in sequence { hash(item, into: &hasher) }
        case .mapping(let mapping):
            hasher.combine(mapping.count)
            for pair in mapping {
                hash(pair.key, into: &hasher)
                hash(pair.value, into: &hasher)
            }
        }
    }
}
