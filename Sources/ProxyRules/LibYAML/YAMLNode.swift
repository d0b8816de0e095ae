/// A YAML node as `YAMLComposer` builds it from libyaml's events: what the rule loader reads. Aliases are resolved
/// (an alias is the anchored node itself, with the anchored node's mark); merge keys (`<<`) are expanded.
/// A value: safe to read from any thread.
enum YAMLNode: Sendable {
    case scalar(Scalar)
    case sequence(Sequence)
    case mapping(Mapping)

    /// Where the node starts (its anchor or tag, if it has one), 1-based.
    var mark: YAMLMark {
        switch self {
        case .scalar(let scalar): scalar.mark
        case .sequence(let sequence): sequence.mark
        case .mapping(let mapping): mapping.mark
        }
    }

    /// The node's type: its declared tag, else what a plain scalar's text reads as (`YAMLTag.resolve`); `!` and
    /// no tag on a collection give `!!seq` / `!!map`.
    var tag: YAMLTag {
        switch self {
        case .scalar(let scalar): scalar.tag
        case .sequence(let sequence): sequence.declaredTag.map { $0 == .nonSpecific ? .seq : $0 } ?? .seq
        case .mapping(let mapping): mapping.declaredTag.map { $0 == .nonSpecific ? .map : $0 } ?? .map
        }
    }

    /// The text of a scalar; nil for a collection.
    var string: String? {
        if case .scalar(let scalar) = self { return scalar.string }
        return nil
    }

    struct Scalar: Sendable {
        enum Style: Sendable {
            case plain, singleQuoted, doubleQuoted, literal, folded
        }

        /// The text, with escapes and line folding applied (it may hold NUL from a `\0` escape).
        var string: String
        var style: Style
        var declaredTag: YAMLTag?
        var mark: YAMLMark

        var tag: YAMLTag {
            guard let declaredTag else { return YAMLTag.resolve(plain: string) }
            return declaredTag == .nonSpecific ? .str : declaredTag
        }
    }

    struct Sequence: RandomAccessCollection, Sendable {
        var items: [YAMLNode]
        var declaredTag: YAMLTag?
        var mark: YAMLMark

        var startIndex: Int { items.startIndex }
        var endIndex: Int { items.endIndex }
        subscript(position: Int) -> YAMLNode { items[position] }
    }

    /// The pairs in file order; a key may repeat only as a different node (see `YAMLComposer`'s duplicate check).
    struct Mapping: RandomAccessCollection, Sendable {
        typealias Element = (key: YAMLNode, value: YAMLNode)

        var pairs: [Element]
        var declaredTag: YAMLTag?
        var mark: YAMLMark

        var startIndex: Int { pairs.startIndex }
        var endIndex: Int { pairs.endIndex }
        subscript(position: Int) -> Element { pairs[position] }
    }
}

/// A position in a YAML text: 1-based line, and column in Unicode scalars (libyaml's count), 1-based.
struct YAMLMark: Sendable, Hashable, CustomStringConvertible {
    var line: Int
    var column: Int

    var description: String { "\(line):\(column)" }
}

/// A YAML tag by its full name (`!!str` is `tag:yaml.org,2002:str`; local tags keep their `!`).
struct YAMLTag: Sendable, Hashable, CustomStringConvertible {
    var name: String

    init(_ name: String) { self.name = name }

    var description: String { name }

    /// `!`: a node that is a string, list or mapping by its kind, never by its text.
    static let nonSpecific = YAMLTag("!")
    static let str = YAMLTag("tag:yaml.org,2002:str")
    static let seq = YAMLTag("tag:yaml.org,2002:seq")
    static let map = YAMLTag("tag:yaml.org,2002:map")
    static let bool = YAMLTag("tag:yaml.org,2002:bool")
    static let int = YAMLTag("tag:yaml.org,2002:int")
    static let float = YAMLTag("tag:yaml.org,2002:float")
    static let null = YAMLTag("tag:yaml.org,2002:null")
    static let merge = YAMLTag("tag:yaml.org,2002:merge")
    static let timestamp = YAMLTag("tag:yaml.org,2002:timestamp")
    static let value = YAMLTag("tag:yaml.org,2002:value")
}
