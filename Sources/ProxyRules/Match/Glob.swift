/// A compiled glob: `*` matches any run of characters (including `/`), `?` exactly one character, everything else
/// itself. Matching is on UTF-8 bytes with star backtracking: O(pattern × text) worst case, no allocation.
/// Immutable and thread-safe; a class, so that trying many globs per request copies references, not their arrays.
final class Glob: Sendable, Hashable, CustomStringConvertible {
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
    /// The fewest bytes a matching text can have (every byte and `?` element needs at least one).
    private let minimumLength: Int
    /// The bytes after the last `*` (all of them without a star), which a matching text must end with: checked
    /// before any backtracking, so that most non-matching texts fail in a few comparisons.
    private let tail: [UInt8]

    /// The literal bytes after the last `*` or `?` (lowercased when matched case-insensitively), which every
    /// matching text ends with.
    var literalTail: String { String(decoding: tail, as: UTF8.self) }

    /// The pattern itself when it has no `*` or `?` (lowercased when matched case-insensitively): such a glob
    /// matches exactly that text, which lets rules be looked up by host instead of tried one by one.
    var literal: String? {
        elements.allSatisfy({ if case .byte = $0 { return true } else { return false } }) && !elements.isEmpty
            ? String(decoding: tail, as: UTF8.self) : nil
    }

    var description: String { pattern }

    static func == (lhs: Glob, rhs: Glob) -> Bool {
        lhs.pattern == rhs.pattern && lhs.caseInsensitive == rhs.caseInsensitive
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(pattern)
        hasher.combine(caseInsensitive)
    }

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
        self.minimumLength = elements.count(where: { $0 != .star })
        var tail: [UInt8] = []
        for element in elements.reversed() {
            guard case .byte(let byte) = element else { break }
            tail.append(byte)
        }
        self.tail = tail.reversed()
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
        let n = bytes.count
        if n < minimumLength { return false }
        var k = tail.count, end = n
        while k > 0 {
            k -= 1
            end -= 1
            if (caseInsensitive ? Glob.lower(bytes[end]) : bytes[end]) != tail[k] { return false }
        }
        var p = 0, t = 0
        var starP = -1, starT = 0
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
