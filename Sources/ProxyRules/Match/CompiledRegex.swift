import Foundation

/// An NSRegularExpression compiled once at load. NSRegularExpression is immutable and documented thread-safe,
/// hence `@unchecked Sendable`.
struct CompiledRegex: @unchecked Sendable {
    let pattern: String
    let regex: NSRegularExpression

    var groupCount: Int { regex.numberOfCaptureGroups }

    static func compile(_ pattern: String) -> Result<CompiledRegex, RegexError> {
        do {
            return .success(CompiledRegex(pattern: pattern, regex: try NSRegularExpression(pattern: pattern)))
        } catch {
            return .failure(RegexError(reason: "not a valid regular expression"))
        }
    }

    /// `[$0, $1, …]` of the first match in `text` (non-participating groups are ""), or nil.
    func firstMatchGroups(in text: String) -> [String]? {
        let ns = text as NSString
        guard let match = regex.firstMatch(in: text, range: NSRange(location: 0, length: ns.length)) else { return nil }
        return (0..<match.numberOfRanges).map { index in
            let range = match.range(at: index)
            return range.location == NSNotFound ? "" : ns.substring(with: range)
        }
    }
}

struct RegexError: Error {
    var reason: String
}
