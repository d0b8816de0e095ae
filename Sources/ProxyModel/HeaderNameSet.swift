/// A fixed set of header names, matched ASCII case-insensitively, as field names are. A name is compared only with
/// the members of its own length, so checking every header of a message against the set costs, for most headers,
/// one array lookup.
public struct HeaderNameSet: Sendable {
    /// Members by their length in UTF-8 bytes.
    private let byLength: [[String]]

    public init(_ names: [String]) {
        var byLength = Array(repeating: [String](), count: (names.map(\.utf8.count).max() ?? 0) + 1)
        for name in names { byLength[name.utf8.count].append(name) }
        self.byLength = byLength
    }

    public func contains(_ name: String) -> Bool {
        let length = name.utf8.count
        guard length < byLength.count else { return false }
        for member in byLength[length] where name.caseInsensitiveEquals(member) { return true }
        return false
    }
}
