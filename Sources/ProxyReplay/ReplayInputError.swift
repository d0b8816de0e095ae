/// Why a HAR file cannot be replayed at all: the file is unreadable, not JSON, not a HAR, or an entry is malformed.
/// The message names the file and, where there is one, the entry (1-based, in file order) and what is wrong in it.
public struct ReplayInputError: Error, Sendable, CustomStringConvertible {
    public let path: String
    /// 1-based entry number, when the problem is in one entry.
    public let entry: Int?
    public let problem: String

    public init(path: String, entry: Int? = nil, problem: String) {
        self.path = path
        self.entry = entry
        self.problem = problem
    }

    public var description: String {
        if let entry { return "hookproxy: \(path): entry \(entry): \(problem)" }
        return "hookproxy: \(path): \(problem)"
    }
}
