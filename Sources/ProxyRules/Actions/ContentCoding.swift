import CompressNIO
import Foundation
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
        header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// Undoes every coding listed, last applied first.
    static func decode(_ body: [UInt8], encoding header: String) -> Result<[UInt8], Failure> {
        var current = body
        for coding in codings(header).reversed() {
            switch coding {
            case "identity":
                continue
            case "gzip", "x-gzip":
                guard let plain = inflate(current, .gzip()) else {
                    return .failure(Failure(reason: "gzip body could not be decoded (corrupt, or larger than \(BodyTransformLimits.maxDecodedBytes) bytes decoded)"))
                }
                current = plain
            case "deflate":
                // RFC 9110 says zlib format; some servers send raw deflate.
                guard let plain = inflate(current, .zlib()) ?? inflate(current, .deflate()) else {
                    return .failure(Failure(reason: "deflate body could not be decoded"))
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

    /// gzip-compresses `bytes` (tests and mocks).
    static func gzip(_ bytes: [UInt8]) -> [UInt8] {
        var buffer = ByteBuffer(bytes: bytes)
        guard let out = try? buffer.compress(with: .gzip()) else { return bytes }
        return Array(out.readableBytesView)
    }
}
