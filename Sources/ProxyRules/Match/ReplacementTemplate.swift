/// A `replace.with` text for a regex, parsed once at load, read as NSRegularExpression read templates (hookproxy's
/// regexes were NSRegularExpression until PCRE2 took over, and rule files written then keep their meaning):
/// - `$N` is group N. The first digit always belongs to N; each further digit joins it while N stays within the
///   pattern's groups (`$12` with 2 groups is group 1, then `2`). A group that did not take part gives "".
/// - `\c` is `c`, whatever it is (`\$`, `\\`); a lone `\` at the end is dropped.
/// - Anything else, a `$` not followed by a digit included, is itself.
struct ReplacementTemplate: Sendable, Equatable {
    enum Piece: Sendable, Equatable {
        case literal([UInt8])
        case group(Int)
    }

    let pieces: [Piece]

    init(_ template: String, groupCount: Int) {
        var pieces: [Piece] = []
        var literal: [UInt8] = []
        let bytes = Array(template.utf8)
        var index = 0
        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x5C {  // backslash: the next byte is literal (a multi-byte character's rest follows as literal)
                if index + 1 < bytes.count { literal.append(bytes[index + 1]) }
                index += 2
            } else if byte == 0x24, index + 1 < bytes.count, isDigit(bytes[index + 1]) {
                var number = Int(bytes[index + 1] - 0x30)
                index += 2
                while index < bytes.count, isDigit(bytes[index]),
                      number * 10 + Int(bytes[index] - 0x30) <= groupCount {
                    number = number * 10 + Int(bytes[index] - 0x30)
                    index += 1
                }
                if !literal.isEmpty { pieces.append(.literal(literal)); literal = [] }
                pieces.append(.group(number))
            } else {
                literal.append(byte)
                index += 1
            }
        }
        if !literal.isEmpty { pieces.append(.literal(literal)) }
        self.pieces = pieces
    }

    /// Appends the expansion to `out`; `group(N)` gives group N's bytes, or nil when it did not take part.
    func expand(into out: inout [UInt8], group: (Int) -> UnsafeBufferPointer<UInt8>?) {
        for piece in pieces {
            switch piece {
            case .literal(let bytes): out.append(contentsOf: bytes)
            case .group(let index): if let bytes = group(index) { out.append(contentsOf: bytes) }
            }
        }
    }
}
