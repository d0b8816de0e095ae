/// How far a YAML text expands through aliases, read from libyaml's events before `YAMLComposer` composes it.
/// The composer shares an aliased node rather than copying it, but whatever walks the tree afterwards walks every
/// alias in full: the composer hashes mapping keys to look for duplicates, the rule parser reads every value. A few
/// lines naming each other ten times over (an alias bomb), or one rule of 20,000 hosts listed again 20,000 times,
/// would hold the loader for minutes. Rule files are read whole; this refuses the text before the composer sees it.
enum AliasExpansion {
    /// The document passed `limit` nodes at this node (1-based `line` and `column`), with `nodes` so far.
    struct Oversized: Equatable {
        let line: Int
        let column: Int
        let nodes: Int
    }

    /// The first node at which the document, aliases expanded, passes `limit` nodes (scalars, lists and mappings
    /// alike), or nil. Text libyaml cannot parse gives nil: the composer then reports the syntax error.
    static func firstOversized(in text: String, limit: Int) -> Oversized? {
        let reader = YAMLEventReader(text)
        var walk = Walk(limit: limit)
        while true {
            guard let (event, mark) = try? reader.next(), event != .streamEnd else { return nil }
            if let oversized = walk.step(event, mark: mark) { return oversized }
        }
    }

    /// The open collections, the size of every anchored node seen and of the document so far, in nodes with
    /// aliases expanded.
    private struct Walk {
        struct Open {
            let anchor: String?
            var nodes = 1
        }

        let limit: Int
        var open: [Open] = []
        var anchors: [String: Int] = [:]
        var documentNodes = 0

        init(limit: Int) { self.limit = limit }

        mutating func step(_ event: YAMLEvent, mark: YAMLMark) -> Oversized? {
            switch event {
            case .documentStart:
                anchors = [:]
                documentNodes = 0
            case .scalar(_, let anchor, _, _):
                return completed(nodes: 1, anchor: anchor, mark: mark)
            case .alias(let anchor):
                return completed(nodes: anchors[anchor] ?? 1, anchor: nil, mark: mark)
            case .sequenceStart(let anchor, _), .mappingStart(let anchor, _):
                open.append(Open(anchor: anchor))
                return counted(1, mark: mark)
            case .sequenceEnd, .mappingEnd:
                guard let closed = open.popLast() else { return nil }
                if let anchor = closed.anchor { anchors[anchor] = closed.nodes }
                addToParent(closed.nodes)
            case .streamStart, .streamEnd, .documentEnd:
                break
            }
            return nil
        }

        /// A scalar or alias: it counts now, toward the document and its parent; an anchored one is remembered.
        private mutating func completed(nodes: Int, anchor: String?, mark: YAMLMark) -> Oversized? {
            if let anchor { anchors[anchor] = nodes }
            addToParent(nodes)
            return counted(nodes, mark: mark)
        }

        /// (A list or mapping counted toward the document at its start, its contents as they come.)
        private mutating func addToParent(_ nodes: Int) {
            guard let last = open.indices.last else { return }
            open[last].nodes = open[last].nodes.addingSaturated(nodes)
        }

        private mutating func counted(_ nodes: Int, mark: YAMLMark) -> Oversized? {
            documentNodes = documentNodes.addingSaturated(nodes)
            guard documentNodes > limit else { return nil }
            return Oversized(line: mark.line, column: mark.column, nodes: documentNodes)
        }
    }
}

private extension Int {
    func addingSaturated(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
