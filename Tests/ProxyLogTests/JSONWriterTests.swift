import Foundation
import Testing
@testable import ProxyLog

/// `JSONWriter`'s values against `JSONEncoder.logLine()`'s, byte for byte.
@Suite struct JSONWriterTests {
    static func encoded<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONEncoder.logLine().encode(value), as: UTF8.self)
    }

    static func written(_ write: (inout JSONWriter) -> Void) -> String {
        var json = JSONWriter()
        write(&json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    @Test func escapesEveryASCIICodePointAsJSONEncoder() throws {
        for value in UInt8(0)...0x7F {
            let string = String(UnicodeScalar(value))
            let ours = Self.written { $0.string(string) }
            #expect(ours == (try Self.encoded(string)), "U+\(String(value, radix: 16))")
        }
        let all = String(String.UnicodeScalarView((UInt8(0)...0x7F).map { UnicodeScalar($0) }))
        let ours = Self.written { $0.string(all) }
        #expect(ours == (try Self.encoded(all)))
        #expect(ours == ##""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"## + "\u{7F}\"")
    }

    /// The 8-bytes-at-a-time scan: every escapable byte found at every position of a word, among plain ASCII and
    /// multi-byte UTF-8, against JSONEncoder.
    @Test func escapesFoundAtEveryOffsetOfTheWordScan() throws {
        let specials: [Character] = ["\"", "\\", "\u{0}", "\u{1F}", "\n", "\u{7F}", "é", "😀", " ", "!", "#", "[", "]"]
        for length in 0...20 {
            for position in 0..<max(1, length) {
                for special in specials {
                    var characters = Array(repeating: Character("a"), count: length)
                    if length > 0 { characters[position] = special }
                    let string = String(characters)
                    #expect(Self.written { $0.string(string) } == (try Self.encoded(string)), "\(Array(string.utf8))")
                }
            }
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab\"\\\u{1}\u{1F} ~é😀\t".unicodeScalars)
        for _ in 0..<500 {
            let string = String(String.UnicodeScalarView((0..<Int.random(in: 0...64, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }))
            #expect(Self.written { $0.string(string) } == (try Self.encoded(string)))
        }
        for byte in UInt8(0)...255 {
            let word = (0x6161_6161_6161_6161 & ~(0xFF << 40)) | UInt64(byte) << 40  // "aaaaaaaa" with `byte` at 5
            let expected = byte < 0x20 || byte == 0x22 || byte == 0x5C
            #expect(JSONWriter.mayNeedEscape(word) == expected, "byte \(byte)")
        }
    }

    @Test func writesNonASCIIAsIs() throws {
        let strings = ["é", "→", "😀", "\u{80}", "\u{85}", "\u{A0}", "\u{7FF}", "\u{800}", "\u{2028}", "\u{2029}",
                       "\u{D7FF}", "\u{E000}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}", "\u{10000}", "\u{10FFFF}",
                       "e\u{301}", "🏳️‍🌈", "日本語", "a\"é\\\u{1}😀/\n"]
        for string in strings {
            #expect(Self.written { $0.string(string) } == (try Self.encoded(string)))
        }
        #expect(Self.written { $0.string("é/😀") } == "\"é/😀\"")
    }

    @Test func doublesAsJSONEncoder() throws {
        // the milliseconds the logs carry: microseconds / 1000, rounded by `ms`, and HAR's -1 and 0
        var values: [Double] = (0...200_000).map { Double($0) / 1000 }
        values += stride(from: 0, through: 100_000_000_000, by: 7_777_777).map { ms(Double($0) / 1000) }
        values += (0..<2000).map { ms(Double($0) * 0.1 + 0.2) } + [-1, -0.0, 0]
        // and Swift's description's corners: exponents, shortest round trip, extremes
        values += [0.1, 0.2, 0.30000000000000004, 1e-05, 1e-07, 0.0001, 0.001, 1e15, 1e16, 1.5e16, 9007199254740992, 9007199254740994,
                   123456789.123, 1e21, 1e22, 1e-300, .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude,
                   -.greatestFiniteMagnitude, 100, 1234567.5, -12.5, .pi, 2.0 / 3]
        var generator = VariedFlows.Generator(state: 1)
        values += (0..<5000).compactMap { _ in
            let value = Double(bitPattern: generator.next())
            return value.isFinite ? value : nil
        }
        let ours = Self.written { json in
            json.beginArray()
            for value in values { json.double(value) }
            json.endArray()
        }
        let theirs = try Self.encoded(values)
        #expect(ours == theirs)
        #expect(Self.written { $0.double(3) } == "3")
        #expect(Self.written { $0.double(12.5) } == "12.5")
        #expect(Self.written { $0.double(1e-05) } == "1e-05")
        #expect(Self.written { $0.double(0.1 + 0.2) } == "0.30000000000000004")
    }

    /// JSONEncoder throws on them (and the record would not be written); the writer writes null.
    @Test func nonFiniteDoublesAreNull() {
        #expect(Self.written { json in
            json.beginArray()
            json.double(.nan)
            json.double(.infinity)
            json.double(-.infinity)
            json.endArray()
        } == "[null,null,null]")
    }

    @Test func integersBoolsNullAsJSONEncoder() throws {
        let ints = [0, 1, -1, 9, 10, 99, 100, -100, 1234567890, Int(Int32.max), Int.max, Int.min, Int.min + 1]
        let ours = Self.written { json in
            json.beginArray()
            for value in ints { json.int(value) }
            json.endArray()
        }
        #expect(ours == (try Self.encoded(ints)))
        #expect(Self.written { json in
            json.beginArray()
            json.bool(true)
            json.bool(false)
            json.null()
            json.endArray()
        } == (try Self.encoded([true, false, nil] as [Bool?])))
    }

    @Test func nestingAndCommas() {
        let ours = Self.written { json in
            json.beginObject()
            json.key("a")
            json.beginArray()
            json.beginObject()
            json.endObject()
            json.beginArray()
            json.endArray()
            json.int(1)
            json.endArray()
            json.field("b", nil as String?)
            json.field("c", ["x", "y"])
            json.field("d", array: [1, 2]) { json, value in json.int(value) }
            json.key("e")
            json.beginObject()
            json.field("f", true)
            json.endObject()
            json.endObject()
        }
        #expect(ours == #"{"a":[{},[],1],"b":null,"c":["x","y"],"d":[1,2],"e":{"f":true}}"#)
    }

    @Test func resetStartsOverAndDropsAHugeBuffer() {
        var json = JSONWriter(capacity: 16, retainedCapacity: 1024)
        json.int(1)
        json.reset()
        json.int(2)
        #expect(json.bytes == Array("2".utf8)) // no comma carried over
        json.string(String(repeating: "x", count: 10_000))
        json.reset()
        #expect(json.bytes.isEmpty)
        #expect(json.capacity <= 1024)
    }
}

/// The logs' base64 against Foundation's, for every length up to a few groups past a boundary and random bytes.
@Suite struct Base64Tests {
    @Test func sameTextAsFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.encode(bytes) == Data(bytes).base64EncodedString(), "\(length) bytes")
        }
        #expect(Base64.encode(Array(repeating: 0xFF, count: 4)) == "/////w==")
        #expect(Base64.encode(Array("hookproxy".utf8)) == "aG9va3Byb3h5")
    }
}

/// `JSONWriter.double` against JSONEncoder.
struct JSONWriterDoubleTests {
    /// Millisecond figures take an integer path; it must print what JSONEncoder prints, on random three-decimal
    /// values of every size it takes, on values it must leave to `description`, and on the edges.
    @Test func millisecondFiguresAsJSONEncoder() throws {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        var values: [Double] = [0, -0.0, 0.001, -0.001, 0.1, 0.12, 0.123, 1, 10, 999_999_999.999, 123_456.5, 1e11 + 0.25,
                                999_999_999_999.999, 1e12, 1e15, 0.1 + 0.2, 2.675, 1.0005, 0.0001, 1e-7, 5e-324,
                                Double.greatestFiniteMagnitude, -1234.5678]
        for _ in 0..<3000 {
            let magnitude = [1.0, 1e3, 1e6, 1e9, 1e12][Int(next() % 5)]
            let thousandths = Double(next() % UInt64(magnitude * 1000))
            values.append((next() % 2 == 0 ? 1 : -1) * thousandths / 1000)
            values.append(Double(bitPattern: next() >> 2))  // arbitrary doubles, mostly not three-decimal
        }
        for value in values where value.isFinite {
            #expect(JSONWriterTests.written { $0.double(value) } == (try JSONWriterTests.encoded(value)), "\(value)")
        }
    }
}

/// Base64 encoded straight into the writer's buffer reads as the quoted base64 string did, commas included.
struct LoggedTextTests {
    @Test func base64InPlaceEqualsTheQuotedString() throws {
        for length in 0...70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let inPlace = JSONWriterTests.written { json in
                json.beginArray(); json.loggedText(.base64(bytes)); json.loggedText(.base64(bytes)); json.endArray()
            }
            let quoted = JSONWriterTests.written { json in
                json.beginArray(); json.string(Base64.encode(bytes)); json.string(Base64.encode(bytes)); json.endArray()
            }
            #expect(inPlace == quoted, "\(length) bytes")
            #expect(inPlace == (try JSONWriterTests.encoded([LoggedText.base64(bytes), .base64(bytes)])))
        }
        #expect(JSONWriterTests.written { $0.loggedText(.text("a\"b")) } == #""a\"b""#)
    }
}
