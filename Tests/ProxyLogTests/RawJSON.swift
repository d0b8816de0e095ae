/// A compact JSON text as written, to compare two encoders byte for byte up to the order of object members:
/// strings and numbers keep their exact bytes (escapes, number spelling), objects their members in written order.
/// Parses only what a compact encoder writes: any whitespace between tokens is an error.
indirect enum RawJSON: Equatable {
    struct Member: Equatable {
        var key: [UInt8]
        var value: RawJSON
    }

    case scalar([UInt8])
    case array([RawJSON])
    case object([Member])

    struct ParseError: Error, CustomStringConvertible {
        var offset: Int
        var description: String { "not compact JSON at byte \(offset)" }
    }

    static func parse(_ bytes: [UInt8]) throws -> RawJSON {
        var parser = Parser(bytes: bytes)
        let value = try parser.value()
        guard parser.index == bytes.count else { throw ParseError(offset: parser.index) }
        return value
    }

    /// The text again.
    var bytes: [UInt8] {
        switch self {
        case .scalar(let bytes): return bytes
        case .array(let elements):
            return [UInt8(ascii: "[")] + Array(elements.map(\.bytes).joined(separator: [UInt8(ascii: ",")]))
                + [UInt8(ascii: "]")]
        case .object(let members):
            let inner = members.map { $0.key + [UInt8(ascii: ":")] + $0.value.bytes }
            return [UInt8(ascii: "{")] + Array(inner.joined(separator: [UInt8(ascii: ",")])) + [UInt8(ascii: "}")]
        }
    }

    /// The keys of an object, in order (empty for anything else), without their quotes.
    var keys: [String] {
        guard case .object(let members) = self else { return [] }
        return members.map { String(decoding: $0.key.dropFirst().dropLast(), as: UTF8.self) }
    }

    /// This value with every object's members in the order of the same object in `other`; nil when the two differ
    /// in anything but that order (a key missing or extra, a duplicate key, an array's length, a value's kind).
    /// Scalars are kept as they are: comparing the result's bytes to `other`'s compares them.
    func reordered(like other: RawJSON) -> RawJSON? {
        switch (self, other) {
        case (.scalar, .scalar): return self
        case (.array(let mine), .array(let theirs)):
            guard mine.count == theirs.count else { return nil }
            var result: [RawJSON] = []
            for (element, model) in zip(mine, theirs) {
                guard let reordered = element.reordered(like: model) else { return nil }
                result.append(reordered)
            }
            return .array(result)
        case (.object(let mine), .object(let theirs)):
            guard mine.count == theirs.count, Set(mine.map(\.key)).count == mine.count else { return nil }
            var result: [Member] = []
            for model in theirs {
                guard let member = mine.first(where: { $0.key == model.key }),
                      let value = member.value.reordered(like: model.value) else { return nil }
                result.append(Member(key: member.key, value: value))
            }
            return .object(result)
        default: return nil
        }
    }

    private struct Parser {
        static let scalarBytes = Set("0123456789+-.eEtruefalsn".utf8)
        let bytes: [UInt8]
        var index = 0

        mutating func value() throws -> RawJSON {
            guard index < bytes.count else { throw ParseError(offset: index) }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [Member] = []
                if try peek() == UInt8(ascii: "}") { index += 1; return .object(members) }
                while true {
                    guard try peek() == UInt8(ascii: "\"") else { throw ParseError(offset: index) }
                    let key = try string()
                    try expect(UInt8(ascii: ":"))
                    members.append(Member(key: key, value: try value()))
                    if try peek() == UInt8(ascii: ",") { index += 1; continue }
                    try expect(UInt8(ascii: "}"))
                    return .object(members)
                }
            case UInt8(ascii: "["):
                index += 1
                var elements: [RawJSON] = []
                if try peek() == UInt8(ascii: "]") { index += 1; return .array(elements) }
                while true {
                    elements.append(try value())
                    if try peek() == UInt8(ascii: ",") { index += 1; continue }
                    try expect(UInt8(ascii: "]"))
                    return .array(elements)
                }
            case UInt8(ascii: "\""):
                return .scalar(try string())
            default:
                // a number or a literal: the characters they may hold, up to the next delimiter
                let start = index
                while index < bytes.count, Parser.scalarBytes.contains(bytes[index]) { index += 1 }
                guard index > start else { throw ParseError(offset: index) }
                return .scalar(Array(bytes[start..<index]))
            }
        }

        /// A string token with its quotes, escapes as written.
        mutating func string() throws -> [UInt8] {
            let start = index
            index += 1
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] < 0x20 { throw ParseError(offset: index) } // raw control characters are not JSON
                index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
            }
            guard index < bytes.count else { throw ParseError(offset: index) }
            index += 1
            return Array(bytes[start..<index])
        }

        func peek() throws -> UInt8 {
            guard index < bytes.count else { throw ParseError(offset: index) }
            return bytes[index]
        }

        mutating func expect(_ byte: UInt8) throws {
            guard try peek() == byte else { throw ParseError(offset: index) }
            index += 1
        }
    }
}
