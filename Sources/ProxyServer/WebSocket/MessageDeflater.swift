import CompressNIO
import NIOCore

/// Compresses the messages of one direction of a session whose messages a `websocket` rule edits under
/// `permessage-deflate` (RFC 7692). An edited message must go out compressed by hookproxy, and from then on the
/// receiver's window holds hookproxy's output, not the sender's: so every compressed message of that direction is
/// inflated (`MessageInflater`) and compressed again here, edited or not. Client connection's loop.
final class MessageDeflater {
    private let compressor: ZlibCompressor
    private let resetsPerMessage: Bool

    /// - Parameters:
    ///   - windowBits: the agreed `*_max_window_bits` of the original sender (the receiver's window); zlib cannot
    ///     write raw DEFLATE with an 8-bit window, so nil then.
    ///   - noContextTakeover: the agreed `*_no_context_takeover` of the original sender.
    init?(windowBits: Int32, noContextTakeover: Bool) {
        guard (9...15).contains(windowBits),
              let compressor = try? ZlibCompressor(algorithm: .deflate, configuration: ZlibConfiguration(windowSize: windowBits))
        else { return nil }
        self.compressor = compressor
        resetsPerMessage = noContextTakeover
    }

    /// The message compressed as one `permessage-deflate` payload (sync-flushed, without its final `00 00 FF FF`);
    /// nil if zlib fails.
    func deflate(_ message: ByteBuffer) -> ByteBuffer? {
        // zlib refuses a second flush with no new input (Z_BUF_ERROR): an empty message is the single byte 0x00
        // (RFC 7692 §7.2.3.6), which leaves both windows as they were.
        guard message.readableBytes > 0 else { return ByteBuffer(bytes: [0x00]) }
        var input = message
        var output = ByteBufferAllocator().buffer(capacity: compressor.maxSize(from: input))
        do {
            try compressor.deflate(from: &input, to: &output, flush: .sync)
        } catch {
            return nil
        }
        guard input.readableBytes == 0 else { return nil }
        if output.readableBytes >= 4, output.getBytes(at: output.writerIndex - 4, length: 4) == [0x00, 0x00, 0xFF, 0xFF] {
            output.moveWriterIndex(to: output.writerIndex - 4)
        }
        if resetsPerMessage { try? compressor.reset() }
        return output
    }
}
