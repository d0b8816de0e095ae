import CompressNIO
import NIOCore

/// Undoes `permessage-deflate` (RFC 7692) for one direction of a session, for the logs and the `websocket`
/// transforms: each compressed message is raw DEFLATE data without its final `00 00 FF FF`, and unless
/// `*_no_context_takeover` was agreed, the window carries over from message to message, so every compressed message
/// of the direction goes through the same inflater, in order. Client connection's loop.
final class MessageInflater {
    private let decompressor: ZlibDecompressor?
    private let resetsPerMessage: Bool
    /// Past this many bytes of output, a message is not inflated (the log shows its size only) and the stream is
    /// given up: its window no longer matches.
    static let maxMessageBytes = 64 * 1024 * 1024
    private var broken = false

    /// - Parameters:
    ///   - windowBits: the agreed `*_max_window_bits` of the sender (15 when not given).
    ///   - noContextTakeover: the agreed `*_no_context_takeover` of the sender.
    init(windowBits: Int32, noContextTakeover: Bool) {
        decompressor = try? ZlibDecompressor(algorithm: .deflate, windowSize: max(9, min(15, windowBits)))
        resetsPerMessage = noContextTakeover
    }

    /// The message's payload, inflated; nil when it cannot be (corrupt, too large, an earlier failure).
    func inflate(_ compressed: ByteBuffer) -> ByteBuffer? {
        guard let decompressor, !broken else { return nil }
        var input = compressed
        input.writeBytes([0x00, 0x00, 0xFF, 0xFF])
        var output = ByteBufferAllocator().buffer(capacity: max(1024, compressed.readableBytes * 4))
        while true {
            do {
                try decompressor.inflate(from: &input, to: &output)
                break
            } catch let error as CompressNIOError where error == .bufferOverflow {
                guard output.capacity < MessageInflater.maxMessageBytes else {
                    broken = true
                    return nil
                }
                output.reserveCapacity(minimumWritableBytes: output.capacity)
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                break  // all input consumed: the message (a sync-flushed block) is complete
            } catch {
                broken = true
                return nil
            }
            if input.readableBytes == 0 { break }
        }
        if resetsPerMessage { try? decompressor.reset() }
        return output
    }
}

/// The `permessage-deflate` parameters a 101 agreed on, per sender.
struct DeflateAgreement: Equatable {
    var clientWindowBits: Int32 = 15
    var serverWindowBits: Int32 = 15
    var clientNoContextTakeover = false
    var serverNoContextTakeover = false

    /// From the server's `Sec-WebSocket-Extensions` answer; nil when it did not accept `permessage-deflate`.
    init?(serverAnswer: [String]) {
        let offers = serverAnswer.flatMap { $0.split(separator: ",") }
        guard let deflate = offers.first(where: {
            $0.split(separator: ";").first?.trimmingSpaces().lowercased() == "permessage-deflate"
        }) else { return nil }
        for parameter in deflate.split(separator: ";").dropFirst() {
            // Empty pieces kept: a bare `=` is two empty strings, not an empty list (it crashed the proxy).
            let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { $0.trimmingSpaces().lowercased() }
            let value = parts.count > 1 ? Int32(parts[1].trimmingCharacters(in: "\"")) : nil
            switch parts[0] {
            case "client_no_context_takeover": clientNoContextTakeover = true
            case "server_no_context_takeover": serverNoContextTakeover = true
            case "client_max_window_bits": if let value { clientWindowBits = value }
            case "server_max_window_bits": if let value { serverWindowBits = value }
            default: break
            }
        }
    }
}

private extension String {
    func trimmingCharacters(in quote: Character) -> String {
        var text = Substring(self)
        while text.first == quote { text.removeFirst() }
        while text.last == quote { text.removeLast() }
        return String(text)
    }
}
