import CompressNIO
import NIOCore

/// Undoes `permessage-deflate` (RFC 7692) for one direction of a session, for the logs and the `websocket`
/// transforms: each compressed message is raw DEFLATE data without its final `00 00 FF FF`, and unless
/// `*_no_context_takeover` was agreed, the window carries over from message to message, so every compressed message
/// of the direction goes through the same inflater, in order. A message is inflated piece by piece as its frames
/// come, into a small reused buffer handed to the caller: nothing of it is held here, whatever its size (a session
/// once kept every compressed message whole, up to 64 MiB per direction, for as long as it lasted). Client
/// connection's loop.
final class MessageInflater {
    private let decompressor: ZlibDecompressor?
    private let resetsPerMessage: Bool
    /// Past this many bytes of output, the rest of a message is not inflated (the log shows its size only); with
    /// context takeover the stream is given up too: its window no longer matches.
    static let maxMessageBytes = 64 * 1024 * 1024
    /// How much output zlib writes at a time.
    static let chunkBytes = 16 * 1024
    /// The stream cannot be inflated any more (a corrupt or oversized message, with context takeover).
    private var broken = false
    /// The current message cannot be inflated; its later pieces are ignored.
    private var messageFailed = false
    private var messageBytes = 0
    private var chunk = ByteBuffer()
    /// What the sender took off the end of each message.
    private static let tail = ByteBuffer(bytes: [0x00, 0x00, 0xFF, 0xFF])

    /// - Parameters:
    ///   - windowBits: the agreed `*_max_window_bits` of the sender (15 when not given).
    ///   - noContextTakeover: the agreed `*_no_context_takeover` of the sender.
    init(windowBits: Int32, noContextTakeover: Bool) {
        decompressor = try? ZlibDecompressor(algorithm: .deflate, windowSize: max(9, min(15, windowBits)))
        resetsPerMessage = noContextTakeover
    }

    /// Inflates the next piece of the current message (a frame's payload), handing the output to `output` in pieces
    /// of at most `chunkBytes` (valid during the call only); `last` ends the message (its `00 00 FF FF` goes after
    /// it). False once the message cannot be inflated: corrupt, over `maxMessageBytes`, or the stream broke earlier.
    @discardableResult
    func inflate(_ piece: ByteBuffer, last: Bool, into output: (ByteBuffer) -> Void) -> Bool {
        defer { if last { endMessage() } }
        guard decompressor != nil, !broken, !messageFailed else { return false }
        guard run(piece, output), !last || run(MessageInflater.tail, output, isTail: true) else {
            messageFailed = true
            if !resetsPerMessage { broken = true }
            return false
        }
        return true
    }

    /// A whole message inflated at once; nil when it cannot be.
    func inflate(_ message: ByteBuffer) -> ByteBuffer? {
        var whole = ByteBuffer()
        return inflate(message, last: true) { whole.writeImmutableBuffer($0) } ? whole : nil
    }

    /// Inflates `piece`; `isTail`: it is the `00 00 FF FF` the sender took off, which completes the empty stored block
    /// a sync flush ends with, or, after a block with BFINAL set, is not part of the stream.
    private func run(_ piece: ByteBuffer, _ output: (ByteBuffer) -> Void, isTail: Bool = false) -> Bool {
        guard let decompressor else { return false }
        var input = piece
        var restarted = false
        while input.readableBytes > 0 {
            chunk.clear()
            chunk.reserveCapacity(MessageInflater.chunkBytes)
            let before = input.readableBytes
            var outputFull = false
            do {
                try decompressor.inflate(from: &input, to: &chunk)
            } catch let error as CompressNIOError where error == .bufferOverflow {
                outputFull = true
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                // all input taken, no more output from it: the next piece goes on
            } catch {
                return false
            }
            if chunk.readableBytes > 0 {
                messageBytes += chunk.readableBytes
                guard messageBytes <= MessageInflater.maxMessageBytes else { return false }
                output(chunk)
            }
            if outputFull || input.readableBytes == 0 { continue }
            // zlib returned with input left and room to spare: a block with BFINAL set ended the sender's DEFLATE
            // stream (RFC 7692 §7.2.3.4 allows it), and what follows starts a new one, with an empty window. The tail
            // after such a block is not inflated. (hookproxy once answered every later message of the stream with
            // nothing: logged empty, and, edited, sent empty.)
            guard !restarted || input.readableBytes < before, (try? decompressor.reset()) != nil else { return false }
            if isTail { return true }
            restarted = true
        }
        return true
    }

    private func endMessage() {
        if resetsPerMessage, !broken { try? decompressor?.reset() }
        messageFailed = false
        messageBytes = 0
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
