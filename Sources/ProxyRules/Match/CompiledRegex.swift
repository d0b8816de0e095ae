/// A rule's regular expression (`match.path_regex`, `replace.regex`), compiled once at load. PCRE2 syntax, with
/// Unicode semantics as ICU and NSRegularExpression have; each match is bounded (see `PCRE2Pattern.Budget`).
struct CompiledRegex: Sendable {
    let pattern: String
    private let compiled: PCRE2Pattern

    var groupCount: Int { compiled.groupCount }

    static func compile(_ pattern: String) -> Result<CompiledRegex, RegexError> {
        let (translated, origin) = ICUEscapes.translate(pattern)
        switch PCRE2Pattern.compile(translated) {
        case .success(let compiled):
            return .success(CompiledRegex(pattern: pattern, compiled: compiled))
        case .failure(let failure):
            let offset = origin[min(max(failure.offset, 0), origin.count - 1)]
            return .failure(RegexError(reason: "\(failure.message) (at offset \(offset))"))
        }
    }

    /// What `firstMatch` found.
    enum FirstMatch: Equatable {
        /// `[$0, $1, …]`, non-participating groups "".
        case matched([String])
        case notMatched
        /// The match needed more backtracking steps or heap than `PCRE2Pattern.Budget` allows: undecided.
        case overBudget
    }

    /// The first match in `text`, telling a match that ran out of its budget from one that found nothing.
    func firstMatch(in text: String) -> FirstMatch {
        var text = text
        return text.withUTF8 { bytes in
            let scratch = PCRE2Pattern.Scratch(for: compiled)
            switch compiled.match(bytes, from: 0, scratch: scratch) {
            case .noMatch: return .notMatched
            case .overBudget: return .overBudget
            case .match:
                return .matched((0...groupCount).map { index in
                    guard let range = compiled.range(ofGroup: index, in: scratch) else { return "" }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
                })
            }
        }
    }

    /// Why `replacing` gave up.
    enum ReplaceFailure: Error, Equatable {
        /// One match needed more backtracking steps or heap than `PCRE2Pattern.Budget` allows.
        case matchBudget
        /// `deadline` passed between matches.
        case timeBudget
        /// The result would have been larger than `maxBytes`.
        case tooLarge
    }

    /// `text` with every match replaced by `template` expanded, as long as it stays within `maxBytes` of UTF-8.
    /// Matches do not overlap; after an empty match the search goes on one character further, as
    /// NSRegularExpression's (ICU's) does.
    func replacing(in text: String, with template: ReplacementTemplate, deadline: ContinuousClock.Instant,
                   maxBytes: Int) -> Result<String, ReplaceFailure> {
        var subject = text
        let outcome = subject.withUTF8 { bytes -> Result<[UInt8], ReplaceFailure>? in
            let scratch = PCRE2Pattern.Scratch(for: compiled)
            var out: [UInt8] = []
            var copied = 0, position = 0, matched = false
            while position <= bytes.count {
                switch compiled.match(bytes, from: position, scratch: scratch) {
                case .overBudget: return .failure(.matchBudget)
                case .noMatch: position = bytes.count + 1; continue
                case .match: break
                }
                guard let whole = compiled.range(ofGroup: 0, in: scratch) else { return .failure(.matchBudget) }
                if !matched { out.reserveCapacity(min(bytes.count, maxBytes)) }
                matched = true
                out.append(contentsOf: bytes[copied..<whole.lowerBound])
                template.expand(into: &out) { index in
                    compiled.range(ofGroup: index, in: scratch).map { UnsafeBufferPointer(rebasing: bytes[$0]) }
                }
                // What is left to copy counts too: the result is known to be too large as soon as it is.
                if out.count > maxBytes - (bytes.count - whole.upperBound) { return .failure(.tooLarge) }
                copied = whole.upperBound
                position = whole.upperBound
                if whole.isEmpty {
                    position += 1
                    while position < bytes.count && bytes[position] & 0xC0 == 0x80 { position += 1 }
                }
                if ContinuousClock.now >= deadline { return .failure(.timeBudget) }
            }
            guard matched else { return nil }
            out.append(contentsOf: bytes[copied...])
            return .success(out)
        }
        switch outcome {
        case nil: return .success(text)
        case .failure(let failure)?: return .failure(failure)
        case .success(let bytes)?: return .success(String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// Why a rule's regular expression does not compile.
struct RegexError: Error {
    var reason: String
}

/// ICU's code point escapes, which PCRE2 spells `\x{…}`: `\uhhhh` and `\Uhhhhhhhh` are rewritten before compiling
/// (outside `\Q…\E`, and not after an escaped backslash), so patterns written for NSRegularExpression keep working.
enum ICUEscapes {
    /// The pattern PCRE2 reads, and for each of its bytes the offset of the byte it came from in `pattern` (for
    /// error offsets).
    static func translate(_ pattern: String) -> (String, [Int]) {
        let bytes = Array(pattern.utf8)
        guard bytes.contains(0x5C) else { return (pattern, Array(0...bytes.count)) }
        var out: [UInt8] = [], origin: [Int] = []
        var index = 0, quoted = false
        func isHex(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
        }
        func copy(_ count: Int) {
            for offset in 0..<count where index + offset < bytes.count {
                out.append(bytes[index + offset]); origin.append(index + offset)
            }
            index += count
        }
        while index < bytes.count {
            guard bytes[index] == 0x5C, index + 1 < bytes.count else { copy(1); continue }
            let next = bytes[index + 1]
            if quoted {
                if next == 0x45 { quoted = false }  // \E
                copy(2)
                continue
            }
            let digits = next == 0x75 ? 4 : next == 0x55 ? 8 : 0  // \u, \U
            if digits > 0, index + 2 + digits <= bytes.count, bytes[(index + 2)..<(index + 2 + digits)].allSatisfy(isHex) {
                let start = index
                let escape = Array("\\x{".utf8) + bytes[(index + 2)..<(index + 2 + digits)] + [0x7D]
                out += escape
                origin += Array(repeating: start, count: escape.count)
                index += 2 + digits
                continue
            }
            if next == 0x51 { quoted = true }  // \Q
            copy(2)
        }
        origin.append(bytes.count)
        return (String(decoding: out, as: UTF8.self), origin)
    }
}
