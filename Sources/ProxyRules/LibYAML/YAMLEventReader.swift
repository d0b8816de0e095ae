internal import CLibYAML

/// One libyaml event, in Swift values. Tags are as Yams read them: a quoted or block scalar with no tag of its own
/// is `!!str`; a plain scalar with none has nil (its text decides, `YAMLTag.resolve`).
enum YAMLEvent: Equatable {
    case streamStart
    case streamEnd
    case documentStart
    case documentEnd
    case alias(anchor: String)
    case scalar(String, anchor: String?, tag: YAMLTag?, style: YAMLNode.Scalar.Style)
    case sequenceStart(anchor: String?, tag: YAMLTag?)
    case sequenceEnd
    case mappingStart(anchor: String?, tag: YAMLTag?)
    case mappingEnd
}

/// libyaml's event parser over one UTF-8 text: `next()` until `.streamEnd` or a thrown `YAMLSyntaxError`.
/// Refuses lists and mappings nested deeper than `maxDepth` (libyaml 0.2.5 has no bound of its own, and the
/// loader walks nodes recursively). Owns a copy of the text and the C parser; used by one thread at a time.
final class YAMLEventReader {
    /// Open lists and mappings allowed at once; the one past it is an error at its start.
    static let maxDepth = 1000

    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let bytes: UnsafeMutableBufferPointer<UInt8>
    private let length: Int
    private var depth = 0
    private var failed = false

    init(_ text: String) {
        length = text.utf8.count
        bytes = .allocate(capacity: max(1, length))
        _ = bytes.initialize(from: text.utf8)
        parser = .allocate(capacity: 1)
        // yaml_parser_initialize fails only when malloc does; then every `next()` reports a memory error.
        if yaml_parser_initialize(parser) == 0 { parser.pointee.error = YAML_MEMORY_ERROR }
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(parser, bytes.baseAddress, length)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
        bytes.deallocate()
    }

    /// The next event with the 1-based mark where it starts.
    func next() throws(YAMLSyntaxError) -> (event: YAMLEvent, mark: YAMLMark) {
        var event = yaml_event_t()
        guard !failed, parser.pointee.error == YAML_NO_ERROR, yaml_parser_parse(parser, &event) == 1 else {
            failed = true
            throw syntaxError()
        }
        defer { yaml_event_delete(&event) }
        let mark = YAMLMark(line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)
        let converted: YAMLEvent
        switch event.type {
        case YAML_STREAM_START_EVENT: converted = .streamStart
        case YAML_STREAM_END_EVENT: converted = .streamEnd
        case YAML_DOCUMENT_START_EVENT: converted = .documentStart
        case YAML_DOCUMENT_END_EVENT: converted = .documentEnd
        case YAML_ALIAS_EVENT: converted = .alias(anchor: Self.string(event.data.alias.anchor) ?? "")
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let value = scalar.value.map { String(decoding: UnsafeBufferPointer(start: $0, count: scalar.length), as: UTF8.self) } ?? ""
            let tag = scalar.quoted_implicit != 0 ? YAMLTag.str : Self.string(scalar.tag).map(YAMLTag.init)
            converted = .scalar(value, anchor: Self.string(scalar.anchor), tag: tag, style: Self.style(scalar.style))
        case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
            guard depth < Self.maxDepth else {
                failed = true
                throw YAMLSyntaxError(stage: .composer, problem: "lists and mappings nested more than \(Self.maxDepth) deep",
                                      mark: mark)
            }
            depth += 1
            let isSequence = event.type == YAML_SEQUENCE_START_EVENT
            let start = event.data.sequence_start  // same layout as mapping_start
            let tag = start.implicit != 0 ? nil : Self.string(start.tag).map(YAMLTag.init)
            converted = isSequence ? .sequenceStart(anchor: Self.string(start.anchor), tag: tag)
                                   : .mappingStart(anchor: Self.string(start.anchor), tag: tag)
        case YAML_SEQUENCE_END_EVENT:
            depth -= 1
            converted = .sequenceEnd
        case YAML_MAPPING_END_EVENT:
            depth -= 1
            converted = .mappingEnd
        default:
            // YAML_NO_EVENT: libyaml gives it only after the stream ended or failed, which `failed` rules out.
            failed = true
            throw YAMLSyntaxError(stage: .parser, problem: "no more events after the end of the text", mark: mark)
        }
        return (converted, mark)
    }

    private func syntaxError() -> YAMLSyntaxError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "libyaml gave no reason"
        let problemMark = YAMLMark(line: Int(state.problem_mark.line) + 1, column: Int(state.problem_mark.column) + 1)
        let context = state.context.map { String(cString: $0) }
        let contextMark = context == nil ? nil
            : YAMLMark(line: Int(state.context_mark.line) + 1, column: Int(state.context_mark.column) + 1)
        switch state.error {
        case YAML_MEMORY_ERROR:
            return YAMLSyntaxError(stage: .parser, problem: "out of memory", mark: YAMLMark(line: 1, column: 1))
        case YAML_READER_ERROR:
            return YAMLSyntaxError(stage: .reader, problem: problem, mark: position(ofByte: state.problem_offset))
        case YAML_SCANNER_ERROR:
            return YAMLSyntaxError(stage: .scanner, problem: problem, mark: problemMark, context: context, contextMark: contextMark)
        default:
            return YAMLSyntaxError(stage: .parser, problem: problem, mark: problemMark, context: context, contextMark: contextMark)
        }
    }

    /// Line (counted by line feeds) and column (in characters) of a byte offset, 1-based.
    private func position(ofByte offset: Int) -> YAMLMark {
        let end = min(max(0, offset), length)
        let prefix = UnsafeBufferPointer(rebasing: bytes[..<end])
        let lineStart = prefix.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        let line = prefix.reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
        let column = String(decoding: UnsafeBufferPointer(rebasing: prefix[lineStart...]), as: UTF8.self).count + 1
        return YAMLMark(line: line, column: column)
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func style(_ style: yaml_scalar_style_t) -> YAMLNode.Scalar.Style {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
    }
}

@available(*, unavailable)
extension YAMLEventReader: Sendable {}
