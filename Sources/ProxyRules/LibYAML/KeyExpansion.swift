/// How far a YAML text's mapping keys expand through aliases, read from libyaml's events before `YAMLComposer`
/// composes the text. The composer hashes every mapping key to look for duplicates, and a key that is an alias of
/// an alias bomb (a few lines naming each other ten times over) hashes ~10⁹ nodes: the loader would spin for
/// minutes. Keys in rule files are words; this refuses the text before the composer sees it.
enum KeyExpansion {
    /// A key, or the keys so far, past `limit` nodes once aliases are expanded; `line` and `column` are 1-based.
    struct Oversized: Equatable {
        let line: Int
        let column: Int
        let nodes: Int
    }

    /// The first key at which the expanded size of all mapping keys so far passes `limit` nodes, or nil. Text
    /// libyaml cannot parse gives nil: the composer then reports the syntax error.
    static func firstOversized(in text: String, limit: Int) -> Oversized? {
        let reader = YAMLEventReader(text)
        var walk = Walk(limit: limit)
        while true {
            guard let (event, mark) = try? reader.next(), event != .streamEnd else { return nil }
            if let oversized = walk.step(event, mark: mark) { return oversized }
        }
    }

    /// The open collections and the size of every anchored node seen, in nodes with aliases expanded.
    private struct Walk {
        struct Open {
            let isMapping: Bool
            let anchor: String?
            let mark: YAMLMark
            var nodes = 1
            var nextIsKey = true
        }

        let limit: Int
        var open: [Open] = []
        var anchors: [String: Int] = [:]
        var keyNodes = 0

        init(limit: Int) { self.limit = limit }

        mutating func step(_ event: YAMLEvent, mark: YAMLMark) -> Oversized? {
            switch event {
            case .documentStart:
                anchors = [:]
            case .scalar(_, let anchor, _, _):
                return completed(nodes: 1, anchor: anchor, mark: mark)
            case .alias(let anchor):
                return completed(nodes: anchors[anchor] ?? 1, anchor: nil, mark: mark)
            case .sequenceStart(let anchor, _):
                open.append(Open(isMapping: false, anchor: anchor, mark: mark))
            case .mappingStart(let anchor, _):
                open.append(Open(isMapping: true, anchor: anchor, mark: mark))
            case .sequenceEnd, .mappingEnd:
                guard let closed = open.popLast() else { return nil }
                return completed(nodes: closed.nodes, anchor: closed.anchor, mark: closed.mark)
            case .streamStart, .streamEnd, .documentEnd:
                break
            }
            return nil
        }

        /// A node ends: its size is recorded under its anchor and added to its parent's; a mapping key's is
        /// added to the keys' total.
        private mutating func completed(nodes: Int, anchor: String?, mark: YAMLMark) -> Oversized? {
            if let anchor { anchors[anchor] = nodes }
            guard let last = open.indices.last else { return nil }
            if open[last].isMapping {
                if open[last].nextIsKey {
                    keyNodes = keyNodes.addingSaturated(nodes)
                    if keyNodes > limit {
                        return Oversized(line: mark.line, column: mark.column, nodes: keyNodes)
                    }
                }
                open[last].nextIsKey.toggle()
            }
            open[last].nodes = open[last].nodes.addingSaturated(nodes)
            return nil
        }
    }
}

private extension Int {
    func addingSaturated(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
