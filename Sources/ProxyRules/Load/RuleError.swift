/// One problem in a rule file, at a 1-based line and column. Printed `file:line:col: message`.
/// `file` is the path as the user gave it (e.g. `rules/mocks.yaml`), so the text can be pasted into an editor.
public struct RuleError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = max(1, line)
        self.column = max(1, column)
        self.message = message
    }

    public var description: String { "\(file):\(line):\(column): \(message)" }
}

/// Something allowed but unwise (a literal `password:`, an unset `password_env`). `check` prints it to stderr as
/// `file:line:col: warning: message`; it never stops a load.
public struct RuleWarning: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = max(1, line)
        self.column = max(1, column)
        self.message = message
    }

    public var description: String { "\(file):\(line):\(column): warning: \(message)" }
}

/// A rule set that did not load: every error found across every file (never only the first), in file order.
/// Nothing of a failed load is ever applied.
public struct RuleLoadFailure: Error, Sendable, CustomStringConvertible {
    public var errors: [RuleError]
    public var warnings: [RuleWarning]

    public init(errors: [RuleError], warnings: [RuleWarning] = []) {
        self.errors = errors
        self.warnings = warnings
    }

    /// One `file:line:col: message` per line.
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
