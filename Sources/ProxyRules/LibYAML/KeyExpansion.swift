internal import CYaml

/// How far a YAML text's mapping keys expand through aliases, read from libyaml's events before Yams composes the
/// text. Yams hashes every mapping key to look for duplicates, and a key that is an alias of an alias bomb (a few
/// lines naming each other ten times over) hashes ~10⁹ nodes: the loader would spin for minutes. Keys in rule files
/// are words; this refuses the text before Yams sees it.
enum KeyExpansion {
    /// A key, or the keys so far, past `limit` nodes once aliases are expanded; `line` and `column` are 1-based.
    struct Oversized: Equatable {
        let line: Int
        let column: Int
        let nodes: Int
    }

    /// The first key at which the expanded size of all mapping keys so far passes `limit` nodes, or nil. Text
    /// libyaml cannot parse gives nil: Yams then reports the syntax error with its own message.
    static func firstOversized(in text: String, limit: Int) -> Oversized? {
        var copy = text
        return copy.withUTF8 { bytes in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)
            var walk = Walk(limit: limit)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { return nil }
                if let oversized = walk.step(event) { return oversized }
            }
        }
    }

    /// The open collections and the size of every anchored node seen, in nodes with aliases expanded.
    private struct Walk {
        struct Open {
            let isMapping: Bool
            let anchor: String?
            let mark: yaml_mark_t
            var nodes = 1
            var nextIsKey = true
        }

        let limit: Int
        var open: [Open] = []
        var anchors: [String: Int] = [:]
        var keyNodes = 0

        init(limit: Int) { self.limit = limit }

        mutating func step(_ event: yaml_event_t) -> Oversized? {
            switch event.type {
            case YAML_DOCUMENT_START_EVENT:
                anchors = [:]
            case YAML_SCALAR_EVENT:
                return completed(nodes: 1, anchor: name(event.data.scalar.anchor), mark: event.start_mark)
            case YAML_ALIAS_EVENT:
                let nodes = name(event.data.alias.anchor).flatMap { anchors[$0] } ?? 1
                return completed(nodes: nodes, anchor: nil, mark: event.start_mark)
            case YAML_SEQUENCE_START_EVENT:
                open.append(Open(isMapping: false, anchor: name(event.data.sequence_start.anchor), mark: event.start_mark))
            case YAML_MAPPING_START_EVENT:
                open.append(Open(isMapping: true, anchor: name(event.data.mapping_start.anchor), mark: event.start_mark))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let closed = open.popLast() else { return nil }
                return completed(nodes: closed.nodes, anchor: closed.anchor, mark: closed.mark)
            default:
                break
            }
            return nil
        }

        /// A node ends: its size is recorded under its anchor and added to its parent's; a mapping key's is
        /// added to the keys' total.
        private mutating func completed(nodes: Int, anchor: String?, mark: yaml_mark_t) -> Oversized? {
            if let anchor { anchors[anchor] = nodes }
            guard let last = open.indices.last else { return nil }
            if open[last].isMapping {
                if open[last].nextIsKey {
                    keyNodes = keyNodes.addingSaturated(nodes)
                    if keyNodes > limit {
                        return Oversized(line: Int(mark.line) + 1, column: Int(mark.column) + 1, nodes: keyNodes)
                    }
                }
                open[last].nextIsKey.toggle()
            }
            open[last].nodes = open[last].nodes.addingSaturated(nodes)
            return nil
        }

        private func name(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            pointer.map { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
        }
    }
}

private extension Int {
    func addingSaturated(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
