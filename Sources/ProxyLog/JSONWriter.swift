import ProxyModel

/// Appends compact JSON to one reusable byte buffer: the log writers' encoder (instead of Foundation's `JSONEncoder`,
/// which costs tens of microseconds per record).
///
/// Values come out byte for byte as `JSONEncoder.logLine()` writes them (checked by JSONWriterTests):
/// - strings: `"` `\` and the C0 controls escaped (`\b \t \n \f \r`, the others `\u00xx` in lowercase hex), `/`,
///   DEL and every non-ASCII scalar written as they are (UTF-8);
/// - doubles: Swift's shortest round-trip `description` without a trailing `.0` (`3`, `12.5`, `1e-05`, `1e+16`),
///   which is what `JSONEncoder` writes. Not finite (JSONEncoder throws): `null`;
/// - integers in decimal, `true`, `false`, `null`; no whitespace anywhere.
///
/// Object members come out in the order they are written. (`JSONEncoder` on Linux orders them by its dictionaries'
/// per-instance hash seeds: an order that changes from object to object and run to run.)
///
/// The caller writes well-formed JSON: a `key` before each member value, `begin`/`end` paired. Not thread-safe;
/// each log writer owns one and calls `reset()` before each record.
///
/// The bytes live in one raw allocation that grows by doubling: each append is a store and a count, with none of
/// an array's uniqueness and capacity checks (a HAR entry is a few thousand appends). Noncopyable: it owns the memory.
struct JSONWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    /// The bytes the buffer holds now (written or not).
    private(set) var capacity: Int
    /// How many bytes were written since the last `reset()`.
    private(set) var count = 0
    /// Whether the next value or key follows another one at the same level (and needs a comma).
    private var needsComma = false
    /// `reset()` keeps the buffer's storage up to this size, so that one huge record does not pin its memory.
    private let retainedCapacity: Int

    init(capacity: Int = 64 * 1024, retainedCapacity: Int = 4 << 20) {
        self.retainedCapacity = retainedCapacity
        self.capacity = max(64, capacity)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    /// The JSON written since the last `reset()`, copied (the writers use `withBytes`).
    var bytes: [UInt8] { withBytes { Array($0) } }

    /// Lends the bytes written since the last `reset()` to `body`.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Bytes of the caller's own (a separator, a newline, a trailer), as they are.
    mutating func append(raw bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Starts another top-level value after what is written (a batch of records in one buffer): no comma before it.
    mutating func beginRecord() {
        needsComma = false
    }

    /// Empties the buffer for the next record.
    mutating func reset() {
        if capacity > retainedCapacity {
            base.deallocate()
            capacity = max(64, retainedCapacity / 2)
            base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        }
        count = 0
        needsComma = false
    }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let grown = max(capacity * 2, needed)
        let moved = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 8)
        moved.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = moved
        capacity = grown
    }

    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    // MARK: structure

    mutating func beginObject() {
        separate()
        append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func endObject() {
        append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func beginArray() {
        separate()
        append(UInt8(ascii: "["))
        needsComma = false
    }

    mutating func endArray() {
        append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// The name of the next member of the open object: always one of the writers' own literals, which need no
    /// escape (checked in debug builds), so it is copied as it is.
    mutating func key(_ name: StaticString) {
        separate()
        name.withUTF8Buffer { utf8 in
            assert(!utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") })
            reserve(utf8.count + 3)
            base.storeBytes(of: UInt8(ascii: "\""), toByteOffset: count, as: UInt8.self)
            if let source = utf8.baseAddress { (base + count + 1).copyMemory(from: source, byteCount: utf8.count) }
            base.storeBytes(of: UInt8(ascii: "\""), toByteOffset: count + 1 + utf8.count, as: UInt8.self)
            base.storeBytes(of: UInt8(ascii: ":"), toByteOffset: count + 2 + utf8.count, as: UInt8.self)
            count += utf8.count + 3
        }
        needsComma = false
    }

    // MARK: values

    mutating func string(_ value: String) {
        separate()
        appendQuoted(value)
        needsComma = true
    }

    mutating func int(_ value: Int) {
        separate()
        if value < 0 { append(UInt8(ascii: "-")) }
        appendDigits(UInt64(value.magnitude))  // (Int.min has no positive Int)
        needsComma = true
    }

    /// The decimal digits of `value`, written in place.
    private mutating func appendDigits(_ value: UInt64) {
        reserve(20)
        var rest = value
        var digits = 0
        var probe = rest
        repeat { digits += 1; probe /= 10 } while probe > 0
        var at = count + digits
        repeat {
            at -= 1
            base.storeBytes(of: UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10), toByteOffset: at, as: UInt8.self)
            rest /= 10
        } while rest > 0
        count += digits
    }

    mutating func double(_ value: Double) {
        guard value.isFinite else { return null() }
        separate()
        if appendMillisecondFigure(value) {
            needsComma = true
            return
        }
        var text = value.description
        text.withUTF8 { utf8 in
            let count = utf8.count
            let whole = count >= 2 && utf8[count - 2] == UInt8(ascii: ".") && utf8[count - 1] == UInt8(ascii: "0")
            append(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[..<(whole ? count - 2 : count)]))
        }
        needsComma = true
    }

    /// Writes a value with at most three decimals (every millisecond figure of the logs, rounded so) as
    /// `description` would, less a trailing `.0`, with integer arithmetic; false, writing nothing, for any other
    /// value. Below 10¹² no other decimal with as few digits is as close, so these digits are the shortest that read
    /// back as the value, which is what `description` prints (and without an exponent at this size).
    private mutating func appendMillisecondFigure(_ value: Double) -> Bool {
        let scaled = (value * 1000).rounded()
        guard abs(scaled) < 1e15, scaled / 1000 == value else { return false }
        if value == 0 {
            if value.sign == .minus { append(UInt8(ascii: "-")) }
            append(UInt8(ascii: "0"))
            return true
        }
        var thousandths = Int64(scaled)
        if thousandths < 0 {
            append(UInt8(ascii: "-"))
            thousandths = -thousandths
        }
        appendDigits(UInt64(thousandths / 1000))
        var fraction = Int(thousandths % 1000)
        guard fraction != 0 else { return true }
        append(UInt8(ascii: "."))
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        var divisor = digits == 3 ? 100 : digits == 2 ? 10 : 1
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        }
        return true
    }

    mutating func bool(_ value: Bool) {
        separate()
        append(raw: value ? JSONWriter.trueBytes : JSONWriter.falseBytes)
        needsComma = true
    }

    mutating func null() {
        separate()
        append(raw: JSONWriter.nullBytes)
        needsComma = true
    }

    // MARK: members

    mutating func field(_ name: StaticString, _ value: String) { key(name); string(value) }
    mutating func field(_ name: StaticString, _ value: Int) { key(name); int(value) }
    mutating func field(_ name: StaticString, _ value: Double) { key(name); double(value) }
    mutating func field(_ name: StaticString, _ value: Bool) { key(name); bool(value) }

    mutating func field(_ name: StaticString, _ value: LoggedText) { key(name); loggedText(value) }

    /// A member that is `null` when `value` is nil (as `encode(_:forKey:)` of an optional).
    mutating func field(_ name: StaticString, _ value: LoggedText?) {
        key(name)
        if let value { loggedText(value) } else { null() }
    }

    /// A body's text quoted, or its bytes as a base64 string encoded in place (base64 never needs escaping).
    mutating func loggedText(_ value: LoggedText) {
        switch value {
        case .text(let text):
            string(text)
        case .base64(let bytes):
            separate()
            let length = Base64.length(of: bytes.count)
            reserve(length + 2)
            append(UInt8(ascii: "\""))
            bytes.withUnsafeBufferPointer { input in _ = Base64.encode(input, into: base + count) }
            count += length
            append(UInt8(ascii: "\""))
            needsComma = true
        }
    }

    /// A member that is `null` when `value` is nil (as `encode(_:forKey:)` of an optional).
    mutating func field(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }

    mutating func field(_ name: StaticString, _ value: Int?) {
        key(name)
        if let value { int(value) } else { null() }
    }

    mutating func field(_ name: StaticString, _ value: Double?) {
        key(name)
        if let value { double(value) } else { null() }
    }

    mutating func field(_ name: StaticString, _ values: [String]) {
        key(name)
        beginArray()
        for value in values { string(value) }
        endArray()
    }

    /// A member holding header fields as `[{"name": …, "value": …}]` (JSONL's headers and HAR's).
    mutating func field(_ name: StaticString, nameValues headers: HeaderFields) {
        key(name)
        beginArray()
        for header in headers { nameValue(header.name, header.value) }
        endArray()
    }

    /// One `{"name": …, "value": …}` element.
    mutating func nameValue(_ name: String, _ value: String) {
        beginObject()
        field("name", name)
        field("value", value)
        endObject()
    }

    /// A member whose value is an array, each element written by `element`.
    mutating func field<S: Sequence>(_ name: StaticString, array elements: S,
                                     _ element: (inout JSONWriter, S.Element) -> Void) {
        key(name)
        beginArray()
        for value in elements { element(&self, value) }
        endArray()
    }

    // MARK: bytes

    private static let trueBytes = Array("true".utf8)
    private static let falseBytes = Array("false".utf8)
    private static let nullBytes = Array("null".utf8)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    private mutating func separate() {
        if needsComma { append(UInt8(ascii: ",")) }
    }

    /// `"string"`, escaped; runs of bytes that need no escape are copied at once. The scan looks at 8 bytes at a
    /// time (most log text needs no escape: headers, URLs, base64).
    private mutating func appendQuoted(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            let count = utf8.count
            reserve(count + 2)  // the common case: nothing to escape
            append(UInt8(ascii: "\""))
            guard let base = utf8.baseAddress else { return }
            var runStart = 0
            var index = 0
            while index < count {
                if index + 8 <= count,
                   !JSONWriter.mayNeedEscape(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) {
                    index += 8
                    continue
                }
                let byte = base[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    if runStart < index { append(UnsafeRawBufferPointer(start: base + runStart, count: index - runStart)) }
                    appendEscape(byte)
                    runStart = index + 1
                }
                index += 1
            }
            if runStart < count {
                append(UnsafeRawBufferPointer(start: base + runStart, count: count - runStart))
            }
        }
        append(UInt8(ascii: "\""))
    }

    /// Whether any of the 8 bytes in `word` is a C0 control, `"` or `\` (exact, no false negatives; bytes of
    /// multi-byte UTF-8 sequences never match).
    @inline(__always)
    static func mayNeedEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below0x20 = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote & highs
        let hasBackslash = (backslash &- ones) & ~backslash & highs
        return (below0x20 | hasQuote | hasBackslash) != 0
    }

    private mutating func appendEscape(_ byte: UInt8) {
        append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): append(byte)
        case 0x08: append(UInt8(ascii: "b"))
        case 0x09: append(UInt8(ascii: "t"))
        case 0x0A: append(UInt8(ascii: "n"))
        case 0x0C: append(UInt8(ascii: "f"))
        case 0x0D: append(UInt8(ascii: "r"))
        default:
            append(UInt8(ascii: "u"))
            append(UInt8(ascii: "0"))
            append(UInt8(ascii: "0"))
            append(JSONWriter.hexDigits[Int(byte >> 4)])
            append(JSONWriter.hexDigits[Int(byte & 0xF)])
        }
    }
}
