/// Why a YAML text could not be read: libyaml's reader, scanner or parser refused it, or the composer did (an
/// undefined alias, a second document, lists and mappings nested too deep, a key repeated in one mapping).
struct YAMLSyntaxError: Error, Sendable, Equatable {
    enum Stage: Sendable, Equatable {
        /// The text itself (a control character libyaml does not take); `mark` is computed from the byte offset.
        case reader
        case scanner
        case parser
        case composer
    }

    var stage: Stage
    /// What is wrong, in libyaml's words (`did not find expected ',' or ']'`) or ours.
    var problem: String
    /// Where it is wrong, 1-based.
    var mark: YAMLMark
    /// What was being read when it went wrong (`while parsing a flow sequence`) and where that began.
    var context: String?
    var contextMark: YAMLMark?
    /// The keys a mapping repeats (texts, sorted); `mark` is the first of them. Empty for other errors.
    var duplicateKeys: [String] = []
}
