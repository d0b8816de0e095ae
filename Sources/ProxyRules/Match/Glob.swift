/// A compiled glob: `*` matches any run of characters (including `/`), `?` exactly one character, everything else
/// itself. Matching is on UTF-8 bytes with star backtracking: O(pattern × text) worst case, no allocation.
/// Immutable and thread-safe.
struct Glob: Sendable, Hashable, CustomStringConvertible {
    private enum Element: Sendable, Hashable {
        case byte(UInt8)
        case one
        case star
    }

    let pattern: String
    let caseInsensitive: Bool
    private let elements: [Element]
    /// True for `*` alone: matches anything without looking.
    private let matchesAll: Bool

    var description: String { pattern }

    /// Characters that look like glob syntax we do not support.
    static let unsupported: Set<Character> = ["[", "]", "{", "}"]

    /// Returns nil with a reason when the pattern cannot be a glob.
    static func compile(_ pattern: String, caseInsensitive: Bool) -> Result<Glob, GlobError> {
        if pattern.isEmpty { return .failure(GlobError(reason: "an empty pattern matches nothing")) }
        if let bad = pattern.first(where: { unsupported.contains($0) }) {
            return .failure(GlobError(reason: "'\(bad)' is not glob syntax here (globs know only * and ?; use path_regex for classes)"))
        }
        return .success(Glob(pattern: pattern, caseInsensitive: caseInsensitive))
    }

    /// Matches only the empty text (for `header: {X-Flag: ""}`).
    static let emptyValue = Glob(pattern: "", caseInsensitive: false)

    private init(pattern: String, caseInsensitive: Bool) {
        self.pattern = pattern
        self.caseInsensitive = caseInsensitive
        var elements: [Element] = []
        for byte in pattern.utf8 {
            switch byte {
            case UInt8(ascii: "*"):
                if elements.last != .star { elements.append(.star) }
            case UInt8(ascii: "?"): elements.append(.one)
            default: elements.append(.byte(caseInsensitive ? Glob.lower(byte) : byte))
            }
        }
        self.elements = elements
        self.matchesAll = elements == [.star]
    }

    @inline(__always) private static func lower(_ byte: UInt8) -> UInt8 {
        (byte >= 65 && byte <= 90) ? byte + 32 : byte
    }

    func matches(_ text: String) -> Bool {
        if matchesAll { return true }
        var text = text
        return text.withUTF8 { matches(bytes: $0) }
    }

    private func matches(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var p = 0, t = 0
        var starP = -1, starT = 0
        let n = bytes.count
        while t < n {
            if p < elements.count {
                switch elements[p] {
                case .star:
                    starP = p
                    starT = t
                    p += 1
                    continue
                case .one:
                    t = Glob.nextCharacter(bytes, t)
                    p += 1
                    continue
                case .byte(let expected):
                    let actual = caseInsensitive ? Glob.lower(bytes[t]) : bytes[t]
                    if actual == expected {
                        p += 1
                        t += 1
                        continue
                    }
                }
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starT = Glob.nextCharacter(bytes, starT)
            t = starT
        }
        while p < elements.count, elements[p] == .star { p += 1 }
        return p == elements.count
    }

    /// Index after the UTF-8 scalar starting at `index`.
    @inline(__always) private static func nextCharacter(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> Int {
        var next = index + 1
        while next < bytes.count, bytes[next] & 0xC0 == 0x80 { next += 1 }
        return next
    }
}

struct GlobError: Error {
    var reason: String
}
