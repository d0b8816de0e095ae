/// A glob over a whole URL, as `hookproxy replay --only` takes it: `*` matches any run of characters (`/` included),
/// `?` one character, everything else itself, case-sensitively (the same glob syntax as the rules' `path`).
public struct URLGlob: Sendable, Hashable {
    private let glob: Glob
    public let pattern: String

    /// Throws `URLGlobError` with the reason when the pattern is not a glob (empty, or `[`, `{` syntax).
    public init(_ pattern: String) throws(URLGlobError) {
        switch Glob.compile(pattern, caseInsensitive: false) {
        case .success(let glob): self.glob = glob
        case .failure(let error): throw URLGlobError(reason: error.reason)
        }
        self.pattern = pattern
    }

    public func matches(_ url: String) -> Bool { glob.matches(url) }
}

/// A pattern that is not a glob, and why.
public struct URLGlobError: Error, Sendable {
    public let reason: String
}
