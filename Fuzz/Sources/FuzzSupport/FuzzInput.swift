#if canImport(Glibc)
import Glibc
#endif

/// Reads structured values off a fuzz input, front to back, like LLVM's FuzzedDataProvider: every read succeeds
/// (an exhausted input yields zeros and empty strings), so any byte string is a valid input.
public struct FuzzInput {
    public let bytes: [UInt8]
    public private(set) var offset = 0

    public init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: size))
    }

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var isEmpty: Bool { offset >= bytes.count }
    public var remainingCount: Int { bytes.count - offset }

    public mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A value in `range` from one or two bytes.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = range.upperBound - range.lowerBound
        if span <= 0 { return range.lowerBound }
        let raw = span < 256 ? Int(byte()) : Int(byte()) << 8 | Int(byte())
        return range.lowerBound + raw % (span + 1)
    }

    /// Up to eight bytes as a (possibly negative) Int.
    public mutating func int64() -> Int {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return Int(truncatingIfNeeded: value)
    }

    /// A string ending at the next `terminator` byte (not included) or the end of the input; bytes that are not
    /// UTF-8 become U+FFFD, as `String(decoding:)` does with wire bytes.
    public mutating func string(until terminator: UInt8 = 0x0A) -> String {
        String(decoding: raw(until: terminator), as: UTF8.self)
    }

    /// The raw bytes up to the next `terminator` (not included; the terminator is consumed).
    public mutating func raw(until terminator: UInt8 = 0x0A) -> [UInt8] {
        guard offset < bytes.count else { return [] }
        let end = bytes[offset...].firstIndex(of: terminator) ?? bytes.count
        defer { offset = min(bytes.count, end + 1) }
        return Array(bytes[offset..<end])
    }

    /// Everything left.
    public mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return offset < bytes.count ? Array(bytes[offset...]) : []
    }
}

/// Stops the fuzzer with a message (libFuzzer reports the crash and saves the input).
public func fuzzFail(_ message: String, file: StaticString = #file, line: UInt = #line) -> Never {
    fatalError("fuzz invariant: \(message)", file: file, line: line)
}

/// Splits `bytes` into lines, each keeping its `\n` (the last one may have none), as curl hands header lines over.
public func splitLinesKeepingTerminators(_ bytes: [UInt8]) -> [[UInt8]] {
    var lines: [[UInt8]] = []
    var start = 0
    for (index, byte) in bytes.enumerated() where byte == 0x0A {
        lines.append(Array(bytes[start...index]))
        start = index + 1
    }
    if start < bytes.count { lines.append(Array(bytes[start...])) }
    return lines
}

/// `FUZZ_SKIP_KNOWN=1`: the targets step around crashes already found and reported (see README.md, "Latest runs"),
/// so a run can look for new ones. Off by default: `make fuzz` must keep failing until they are fixed.
public let skipKnownCrashes = getenv("FUZZ_SKIP_KNOWN").map { String(cString: $0) == "1" } ?? false
