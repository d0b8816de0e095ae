/// Checks that bytes are one JSON document, the way Foundation's `JSONSerialization` (swift-corelibs-foundation,
/// with `.fragmentsAllowed`) read it, and says what it would have said about the first fault: the same words and
/// the same `around character N` byte offsets (trailing commas allowed, as it allowed them; nesting up to 512).
/// Builds no values; the keys of a top-level object are kept, unescaped. Pinned against JSONSerialization by
/// JSONCheckTests. Used where hookproxy reads JSON it did not write whole: a HAR to replay, a torn HAR line.
public struct JSONCheck {
    /// `JSONSerialization`'s reason, as its error's debug description spelled it.
    public var problem: String?
    /// The keys of the document's top-level object, in file order (empty when it is not an object).
    public var topLevelKeys: [String] = []

    public init<Bytes: Collection<UInt8>>(_ input: Bytes) {
        var bytes = Array(input)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            bytes.removeFirst(3)
        } else if let unicode = JSONCheck.transcodedUTF16Or32(bytes) {
            guard let utf8 = unicode else {
                problem = "Cannot convert input string to valid utf8 input."
                return
            }
            bytes = utf8
        }
        var scanner = Scanner(bytes: bytes)
        do {
            try scanner.document()
            problem = nil
        } catch {
            problem = error.description
        }
        topLevelKeys = scanner.topLevelKeys
    }

    /// UTF-16 or UTF-32 input (by its byte order mark, or by the zero bytes of its first characters) as UTF-8:
    /// nil when the input is not one of them, .some(nil) when it does not decode.
    private static func transcodedUTF16Or32(_ bytes: [UInt8]) -> [UInt8]?? {
        enum Form { case utf16(big: Bool), utf32(big: Bool) }
        var form: Form?
        var skip = 0
        if bytes.count >= 2 {
            switch (bytes[0], bytes[1]) {
            case (0x00, 0x00) where bytes.count >= 4 && bytes[2] == 0xFE && bytes[3] == 0xFF: (form, skip) = (.utf32(big: true), 4)
            case (0xFF, 0xFE) where bytes.count >= 4 && bytes[2] == 0 && bytes[3] == 0: (form, skip) = (.utf32(big: false), 4)
            case (0xFF, 0xFE): (form, skip) = (.utf16(big: false), 2)
            case (0xFE, 0xFF): (form, skip) = (.utf16(big: true), 2)
            default: break
            }
        }
        if form == nil, bytes.count >= 4 {
            switch (bytes[0], bytes[1], bytes[2], bytes[3]) {
            case (0, 0, 0, _): form = .utf32(big: true)
            case (_, 0, 0, 0): form = .utf32(big: false)
            case (0, _, 0, _): form = .utf16(big: true)
            case (_, 0, _, 0): form = .utf16(big: false)
            default: break
            }
        } else if form == nil, bytes.count >= 2 {
            switch (bytes[0], bytes[1]) {
            case (0, _): form = .utf16(big: true)
            case (_, 0): form = .utf16(big: false)
            default: break
            }
        }
        guard let form else { return nil }
        let body = bytes[skip...]
        var utf8: [UInt8] = []
        var failed = false
        switch form {
        case .utf16(let big):
            guard body.count % 2 == 0 else { return .some(nil) }
            let units = stride(from: body.startIndex, to: body.endIndex, by: 2).map { index -> UInt16 in
                let (a, b) = (UInt16(body[index]), UInt16(body[index + 1]))
                return big ? a << 8 | b : b << 8 | a
            }
            failed = transcode(units.makeIterator(), from: UTF16.self, to: UTF8.self, stoppingOnError: true) { utf8.append($0) }
        case .utf32(let big):
            guard body.count % 4 == 0 else { return .some(nil) }
            let units = stride(from: body.startIndex, to: body.endIndex, by: 4).map { index -> UInt32 in
                let four = (0..<4).map { UInt32(body[index + $0]) }
                return big ? four[0] << 24 | four[1] << 16 | four[2] << 8 | four[3]
                    : four[3] << 24 | four[2] << 16 | four[1] << 8 | four[0]
            }
            failed = transcode(units.makeIterator(), from: UTF32.self, to: UTF8.self, stoppingOnError: true) { utf8.append($0) }
        }
        return failed ? .some(nil) : utf8
    }

    /// JSONSerialization's faults, with its words.
    private enum Fault: Error, CustomStringConvertible {
        case unexpectedCharacter(at: Int)
        case unexpectedEndOfFile
        case tooDeep(at: Int)
        case invalidHex(String, at: Int)
        case invalidEscape(at: Int)
        case controlCharacter(at: Int)
        case noLowSurrogate
        case noScalar
        case leadingZero(at: Int)
        case unrepresentable(String)
        case invalidUTF8(count: Int, at: Int)

        var description: String {
            switch self {
            case .unexpectedCharacter(let at): "Invalid value around character \(at)."
            case .unexpectedEndOfFile: "Unexpected end of file during JSON parse."
            case .tooDeep(let at): "Too many nested arrays or dictionaries around character \(at + 1)."
            case .invalidHex(let text, let at): "Invalid hex encoded sequence in \"\(text)\" at \(at)."
            case .invalidEscape(let at): "Invalid escape sequence around character \(at - 1)."
            case .controlCharacter(let at): "Unescaped control character around character \(at)."
            case .noLowSurrogate:
                "Unexpected end of file during string parse (expected low-surrogate code point but did not find one)."
            case .noScalar: "Unable to convert hex escape sequence (no high character) to UTF8-encoded character."
            case .leadingZero(let at): "Number with leading zero around character \(at)."
            case .unrepresentable(let text): "Number \(text) is not representable in Swift."
            case .invalidUTF8(let count, let at): "Invalid UTF-8 sequence \(count) bytes starting from character \(at)."
            }
        }
    }

    /// JSONSerialization's parser, step for step, keeping no values (but a top-level object's keys).
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        var depth = 0
        var topLevelKeys: [String] = []
        /// The first number the parser could not turn into Int64, UInt64 or a finite Double (reported after the parse).
        var unrepresentable: String?

        init(bytes: [UInt8]) { self.bytes = bytes }

        func peek(_ offset: Int = 0) -> UInt8? { index + offset < bytes.count ? bytes[index + offset] : nil }

        mutating func read() -> UInt8? {
            guard index < bytes.count else {
                index = bytes.count
                return nil
            }
            defer { index += 1 }
            return bytes[index]
        }

        static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0D || byte == 0x0A || byte == 0x09 }

        @discardableResult
        mutating func skipSpace() throws(Fault) -> UInt8 {
            while let byte = peek() {
                if !Scanner.isSpace(byte) { return byte }
                index += 1
            }
            throw .unexpectedEndOfFile
        }

        mutating func document() throws(Fault) {
            try skipSpace()
            try value()
            var offset = 0
            while let next = peek(offset) {
                guard Scanner.isSpace(next) else { throw .unexpectedCharacter(at: index + offset) }
                offset += 1
            }
            if let unrepresentable { throw .unrepresentable(unrepresentable) }
        }

        mutating func value() throws(Fault) {
            while let byte = peek() {
                switch byte {
                case UInt8(ascii: "\""): _ = try string(keep: false)
                case UInt8(ascii: "{"): try object()
                case UInt8(ascii: "["): try array()
                case UInt8(ascii: "t"): try literal("true")
                case UInt8(ascii: "f"): try literal("false")
                case UInt8(ascii: "n"): try literal("null")
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
                case _ where Scanner.isSpace(byte): index += 1; continue
                default: throw .unexpectedCharacter(at: index)
                }
                return
            }
            throw .unexpectedEndOfFile
        }

        mutating func literal(_ word: StaticString) throws(Fault) {
            let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
            for byte in expected where read() != byte {
                guard index < bytes.count else { throw .unexpectedEndOfFile }
                throw .unexpectedCharacter(at: index - 1)
            }
        }

        mutating func array() throws(Fault) {
            index += 1
            guard depth < 512 else { throw .tooDeep(at: index - 1) }
            depth += 1
            defer { depth -= 1 }
            if try skipSpace() == UInt8(ascii: "]") {
                index += 1
                return
            }
            while true {
                try value()
                let next = try skipSpace()
                switch next {
                case UInt8(ascii: "]"):
                    index += 1
                    return
                case UInt8(ascii: ","):
                    index += 1
                    if try skipSpace() == UInt8(ascii: "]") {  // a trailing comma, as JSONSerialization allowed
                        index += 1
                        return
                    }
                default:
                    throw .unexpectedCharacter(at: index)
                }
            }
        }

        mutating func object() throws(Fault) {
            index += 1
            guard depth < 512 else { throw .tooDeep(at: index - 1) }
            depth += 1
            defer { depth -= 1 }
            if try skipSpace() == UInt8(ascii: "}") {
                index += 1
                return
            }
            while true {
                let key = try string(keep: depth == 1)
                if depth == 1, let key { topLevelKeys.append(key) }
                guard try skipSpace() == UInt8(ascii: ":") else { throw .unexpectedCharacter(at: index) }
                index += 1
                try skipSpace()
                try value()
                let next = try skipSpace()
                switch next {
                case UInt8(ascii: "}"):
                    index += 1
                    return
                case UInt8(ascii: ","):
                    index += 1
                    if try skipSpace() == UInt8(ascii: "}") {
                        index += 1
                        return
                    }
                default:
                    throw .unexpectedCharacter(at: index)
                }
            }
        }

        /// A string from its opening quote; its text when `keep`. Every run between escapes must be UTF-8.
        mutating func string(keep: Bool) throws(Fault) -> String? {
            guard read() == UInt8(ascii: "\"") else { throw .unexpectedCharacter(at: index - 1) }
            var runStart = index
            var output = keep ? "" : nil
            while let byte = peek() {
                switch byte {
                case UInt8(ascii: "\""):
                    try append(runStart..<index, to: &output)
                    index += 1
                    return output
                case 0...31:
                    try append(runStart..<index + 1, to: &output)
                    throw .controlCharacter(at: index)
                case UInt8(ascii: "\\"):
                    try append(runStart..<index, to: &output)
                    let escapeStart = index
                    do throws(Fault) {
                        try escape(into: &output)
                    } catch {
                        switch error {
                        case .invalidEscape, .noLowSurrogate, .noScalar:
                            // (JSONSerialization read the escape's bytes as UTF-8 before it reported them)
                            try append(escapeStart..<index, to: &output)
                        default: break
                        }
                        throw error
                    }
                    runStart = index
                default:
                    index += 1
                }
            }
            throw .unexpectedEndOfFile
        }

        /// Checks a run of a string is UTF-8 (JSONSerialization named the run's start); appends it when kept.
        func append(_ range: Range<Int>, to output: inout String?) throws(Fault) {
            let run = bytes[range]
            var iterator = run.makeIterator()
            var valid = true
            var text = ""
            if output != nil { text.reserveCapacity(run.count) }
            var decoder = UTF8()
            decoding: while true {
                switch decoder.decode(&iterator) {
                case .scalarValue(let scalar): if output != nil { text.unicodeScalars.append(scalar) }
                case .emptyInput: break decoding
                case .error: valid = false; break decoding
                }
            }
            guard valid else { throw .invalidUTF8(count: run.count, at: range.lowerBound) }
            output? += text
        }

        mutating func escape(into output: inout String?) throws(Fault) {
            index += 1  // the backslash
            guard let byte = read() else { throw .unexpectedEndOfFile }
            let simple: Unicode.Scalar?
            switch byte {
            case UInt8(ascii: "\""): simple = "\""
            case UInt8(ascii: "\\"): simple = "\\"
            case UInt8(ascii: "/"): simple = "/"
            case UInt8(ascii: "b"): simple = "\u{08}"
            case UInt8(ascii: "f"): simple = "\u{0C}"
            case UInt8(ascii: "n"): simple = "\n"
            case UInt8(ascii: "r"): simple = "\r"
            case UInt8(ascii: "t"): simple = "\t"
            case UInt8(ascii: "u"): simple = nil
            default: throw .invalidEscape(at: index - 1)
            }
            if let simple {
                output?.unicodeScalars.append(simple)
                return
            }
            let unit = try hex()
            guard unit & 0xFC00 == 0xD800 else {
                guard let scalar = Unicode.Scalar(unit) else { throw .noScalar }
                output?.unicodeScalars.append(scalar)
                return
            }
            guard let backslash = read(), let u = read() else { throw .unexpectedEndOfFile }
            guard backslash == UInt8(ascii: "\\"), u == UInt8(ascii: "u") else { throw .noLowSurrogate }
            let low = try hex()
            guard low & 0xFC00 == 0xDC00 else { throw .noLowSurrogate }
            let value = (UInt32(unit) - 0xD800) * 0x400 + (UInt32(low) - 0xDC00) + 0x10000
            guard let scalar = Unicode.Scalar(value) else { throw .noScalar }
            output?.unicodeScalars.append(scalar)
        }

        mutating func hex() throws(Fault) -> UInt16 {
            let start = index
            guard let a = read(), let b = read(), let c = read(), let d = read() else { throw .unexpectedEndOfFile }
            var unit: UInt16 = 0
            for byte in [a, b, c, d] {
                let nibble: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
                case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
                default: throw .invalidHex(String(decoding: [a, b, c, d], as: UTF8.self), at: start)
                }
                unit = unit << 4 | UInt16(nibble)
            }
            return unit
        }

        private enum NumberPart { case operand, decimalPoint, exponent, exponentSign }

        mutating func number() throws(Fault) {
            var part = NumberPart.operand
            var digitsSincePart = 0
            var leadingZero = false
            switch bytes[index] {
            case UInt8(ascii: "0"): (digitsSincePart, leadingZero) = (1, true)
            case UInt8(ascii: "-"): digitsSincePart = 0
            default: digitsSincePart = 1
            }
            var length = 1
            while let byte = peek(length) {
                switch byte {
                case UInt8(ascii: "0"):
                    if leadingZero { throw .leadingZero(at: index + length) }
                    if digitsSincePart == 0, part == .operand { leadingZero = true }
                    length += 1
                    digitsSincePart += 1
                case UInt8(ascii: "1")...UInt8(ascii: "9"):
                    if leadingZero { throw .leadingZero(at: index + length) }
                    length += 1
                    digitsSincePart += 1
                case UInt8(ascii: "."):
                    guard digitsSincePart > 0, part == .operand else { throw .unexpectedCharacter(at: index + length) }
                    length += 1
                    (leadingZero, part, digitsSincePart) = (false, .decimalPoint, 0)
                case UInt8(ascii: "e"), UInt8(ascii: "E"):
                    guard digitsSincePart > 0, part == .operand || part == .decimalPoint else {
                        throw .unexpectedCharacter(at: index + length)
                    }
                    length += 1
                    (leadingZero, part, digitsSincePart) = (false, .exponent, 0)
                case UInt8(ascii: "+"), UInt8(ascii: "-"):
                    guard digitsSincePart == 0, part == .exponent else { throw .unexpectedCharacter(at: index + length) }
                    length += 1
                    (part, digitsSincePart) = (.exponentSign, 0)
                case _ where Scanner.isSpace(byte) || byte == UInt8(ascii: ",") || byte == UInt8(ascii: "]")
                    || byte == UInt8(ascii: "}"):
                    guard digitsSincePart > 0 else { throw .unexpectedCharacter(at: index + length) }
                    noteNumber(index..<index + length)
                    index += length
                    return
                default:
                    throw .unexpectedCharacter(at: index + length)
                }
            }
            guard digitsSincePart > 0 else { throw .unexpectedEndOfFile }
            noteNumber(index..<bytes.count)
            index = bytes.count
        }

        mutating func noteNumber(_ range: Range<Int>) {
            guard unrepresentable == nil else { return }
            let text = String(decoding: bytes[range], as: UTF8.self)
            if Int64(text) != nil || UInt64(text) != nil { return }
            if let double = Double(text), double.isFinite { return }
            unrepresentable = text
        }
    }
}
