import ProxyModel

/// Holds the current RuleSet and swaps it on reload. Thread-safe.
public final class RuleStore: Sendable {
    private let snapshot: RuleSet

    public init(paths: [String]) throws {
        self.snapshot = .empty
    }

    /// The snapshot in force now.
    public var current: RuleSet { snapshot }
}
