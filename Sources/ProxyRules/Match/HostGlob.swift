/// A host-name glob (`*.example.com`, `api-?.test`), matched case-insensitively: what `--intercept` takes.
public struct HostGlob: Sendable, Hashable {
    private let glob: Glob
    public let pattern: String

    /// Nil when the pattern is not a valid glob.
    public init?(_ pattern: String) {
        guard case .success(let glob) = Glob.compile(pattern, caseInsensitive: true) else { return nil }
        self.glob = glob
        self.pattern = pattern
    }

    public func matches(_ host: String) -> Bool { glob.matches(host) }
}
