import Crypto
import NIOCore

/// The deterministic bytes of `/bytes/N`, `/chunked/N`, `/drip` and `/close-mid-body/N`: byte i is `UInt8(i % 251)`.
public func pattern(count: Int, from offset: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8((offset + $0) % 251) }
}

/// Slices of one shared buffer that reproduce the pattern from any offset without allocating per write.
enum PatternBuffer {
    static let period = 251
    /// Longest slice handed out at once (a multiple of the period, about 64 KiB).
    static let sliceLength = period * 256
    static let template: ByteBuffer = {
        var buffer = ByteBufferAllocator().buffer(capacity: sliceLength + period)
        for i in 0..<(sliceLength + period) { buffer.writeInteger(UInt8(i % period)) }
        return buffer
    }()

    /// Up to `limit` pattern bytes starting at absolute position `offset`.
    static func slice(at offset: Int64, limit: Int64) -> ByteBuffer {
        let start = Int(offset % Int64(period))
        let length = Int(min(limit, Int64(sliceLength)))
        return template.getSlice(at: start, length: length)!
    }
}

/// SHA-256 of `bytes` as lower-case hex (what `/sha256` answers).
public func sha256Hex(_ bytes: [UInt8]) -> String {
    var hasher = SHA256()
    hasher.update(data: bytes)
    return hasher.finalize().map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
}

/// Whether `bytes` is exactly `pattern(count:from:)`. Tests compare large bodies with this rather than with `==`
/// inside `#expect`: a failed `==` of two multi-megabyte arrays makes Swift Testing render and diff them both, which
/// takes minutes and holds the whole run.
public func isPattern(_ bytes: [UInt8], count: Int, from offset: Int = 0) -> Bool {
    bytes.count == count && bytes == pattern(count: count, from: offset)
}

/// A short account of where `bytes` stops being the pattern, for a failure message.
public func patternMismatch(_ bytes: [UInt8], count: Int, from offset: Int = 0) -> String {
    let expected = pattern(count: count, from: offset)
    let first = zip(bytes, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
    return "\(bytes.count) bytes (expected \(count))" + (first.map { ", first difference at byte \($0)" } ?? "")
}
