import CompressNIO
import FoundationEssentials
import ProxyModel
import NIOCore

/// Decoding of `Content-Encoding: gzip / deflate` bodies for transforms (CompressNIO over zlib).
enum ContentCoding {
    struct Failure: Error {
        var reason: String
    }

    static func isIdentity(_ header: String) -> Bool {
        codings(header).allSatisfy { $0 == "identity" }
    }

    static func codings(_ header: String) -> [String] {
        header.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
    }

    /// Undoes every coding listed, last applied first.
    static func decode(_ body: [UInt8], encoding header: String) -> Result<[UInt8], Failure> {
        var current = body
        for coding in codings(header).reversed() {
            if current.isEmpty { break }  // nothing to decode (a body-less 200 may still name a coding)
            switch coding {
            case "identity":
                continue
            case "gzip", "x-gzip":
                guard let plain = inflate(current, .gzip()), endsWithGzipTrailer(current, of: plain) else {
                    return .failure(Failure(reason: "gzip body could not be decoded (corrupt, cut short, or larger than \(BodyTransformLimits.maxDecodedBytes) bytes decoded)"))
                }
                current = plain
            case "deflate":
                // RFC 9110 says zlib format; some servers send raw deflate (which has no trailer to check).
                let zlib = inflate(current, .zlib()).flatMap { endsWithAdler32(current, of: $0) ? $0 : nil }
                guard let plain = zlib ?? (isZlibStream(current) ? nil : inflate(current, .deflate())) else {
                    return .failure(Failure(reason: "deflate body could not be decoded (corrupt or cut short)"))
                }
                current = plain
            default:
                return .failure(Failure(reason: "Content-Encoding '\(coding)' is not supported for transforms"))
            }
        }
        return .success(current)
    }

    private static func inflate(_ bytes: [UInt8], _ algorithm: CompressionAlgorithm) -> [UInt8]? {
        if bytes.isEmpty { return [] }
        var buffer = ByteBuffer(bytes: bytes)
        guard let out = try? buffer.decompress(with: algorithm, maxSize: BodyTransformLimits.maxDecodedBytes) else {
            return nil
        }
        return Array(out.readableBytesView)
    }

    // zlib stops without a word where its input ends, even inside the stream (a body cut short decodes to a
    // prefix), and at the end of the first gzip member (the rest of the body would be dropped). A stream that ended
    // where the body ends has its trailer in the body's last bytes (zlib checked it), so the decoded bytes must
    // match it; otherwise the body is not decoded and stays as it came.

    /// Whether `body` ends with the gzip trailer (CRC-32 and size, RFC 1952 §2.3) of `plain`.
    static func endsWithGzipTrailer(_ body: [UInt8], of plain: [UInt8]) -> Bool {
        guard body.count >= 18 else { return false }
        let trailer = body.suffix(8).map(UInt32.init)
        let crc = trailer[0] | trailer[1] << 8 | trailer[2] << 16 | trailer[3] << 24
        let size = trailer[4] | trailer[5] << 8 | trailer[6] << 16 | trailer[7] << 24
        return size == UInt32(truncatingIfNeeded: plain.count) && crc == crc32(plain)
    }

    /// Whether `body` ends with the zlib trailer (Adler-32, RFC 1950) of `plain`.
    static func endsWithAdler32(_ body: [UInt8], of plain: [UInt8]) -> Bool {
        guard body.count >= 6 else { return false }
        let trailer = body.suffix(4).map(UInt32.init)
        return (trailer[0] << 24 | trailer[1] << 16 | trailer[2] << 8 | trailer[3]) == adler32(plain)
    }

    /// Whether `body` starts with a valid zlib header (RFC 1950 §2.2): then it is no raw deflate stream, and a
    /// zlib decode that failed its check is not tried again as one.
    static func isZlibStream(_ body: [UInt8]) -> Bool {
        guard body.count >= 2 else { return false }
        return body[0] & 0x0F == 8 && body[0] >> 4 <= 7 && (UInt16(body[0]) << 8 | UInt16(body[1])) % 31 == 0
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        crcTable.withUnsafeBufferPointer { table in
            bytes.withUnsafeBufferPointer { input in
                for byte in input { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
            }
        }
        return crc ^ 0xFFFF_FFFF
    }

    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        bytes.withUnsafeBufferPointer { input in
            var index = 0
            while index < input.count {
                let end = min(index + 5552, input.count)  // no overflow before the modulo (zlib's NMAX)
                while index < end {
                    a &+= UInt32(input[index])
                    b &+= a
                    index += 1
                }
                a %= 65521
                b %= 65521
            }
        }
        return b << 16 | a
    }

    /// gzip-compresses `bytes` (tests and mocks).
    static func gzip(_ bytes: [UInt8]) -> [UInt8] {
        var buffer = ByteBuffer(bytes: bytes)
        guard let out = try? buffer.compress(with: .gzip()) else { return bytes }
        return Array(out.readableBytesView)
    }
}
