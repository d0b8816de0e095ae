import NIOCore
import NIOHPACK
import ProxyModel

/// How big a header block is on an HTTP/2 client stream. NIO's HTTP/2 frame encoder writes a HEADERS frame whole and
/// never splits it into CONTINUATION frames: a block over the peer's SETTINGS_MAX_FRAME_SIZE fails to encode, and NIO
/// treats that as a connection error, so one upstream response with a large head (big cookies, a long CSP) would
/// take down every other stream of the client's connection. The exchange checks the block first and fails just its
/// own stream instead. Pure.
enum HTTP2HeaderBlock {
    /// The initial SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2), the largest frame every peer accepts; clients rarely
    /// advertise more. A little is kept back for a dynamic table size update at the start of a block.
    static let limit = 16_384 - 16

    /// The HPACK-encoded size of a block of `fields` (with `:status` first when given), as NIO would encode it
    /// (Huffman, lower-cased names) with an encoder of its own: the connection's encoder, with entries in its dynamic
    /// table from earlier blocks, writes at most about as much.
    static func encodedSize(status: Int?, _ fields: HeaderFields) -> Int {
        var headers = HPACKHeaders()
        if let status { headers.add(name: ":status", value: String(status)) }
        for field in fields { headers.add(name: field.name.lowercased(), value: field.value) }
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var buffer = ByteBuffer()
        do {
            try encoder.encode(headers: headers, to: &buffer)
        } catch {
            return .max
        }
        return buffer.readableBytes
    }

    /// Why `fields` cannot go to an HTTP/2 client in one frame, or nil when they can.
    static func problem(status: Int?, _ fields: HeaderFields, what: String) -> String? {
        // Huffman coding makes a byte at most 30 bits, and a field's own framing takes a few bytes: a block whose raw
        // size times four stays under the limit fits without being encoded (nearly every head).
        var raw = 16
        for field in fields { raw += field.name.utf8.count + field.value.utf8.count + 8 }
        if raw * 4 <= limit { return nil }
        let size = encodedSize(status: status, fields)
        guard size > limit else { return nil }
        return "\(what) is \(size) bytes as HTTP/2 HEADERS, more than one frame carries (16384 bytes); hookproxy sends no CONTINUATION frames"
    }
}
