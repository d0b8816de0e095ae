import NIOCore
import NIOEmbedded
import NIOWebSocket
import ProxyTestSupport
import Testing
@testable import ProxyServer

/// `FrameSplitter`: what the decoder gets is the peer's bytes, unless a data frame is over the bound, which it gets
/// as fragments that NIO's own decoder, limited to the bound, reads back into the same message.
struct FrameSplitterTests {
    static let bound = 64

    /// A frame as a peer writes it: `first` is FIN, RSV bits and opcode; masked with `key` when given.
    static func frame(_ first: UInt8, _ payload: [UInt8], key: [UInt8]? = nil, declaring declared: UInt64? = nil) -> [UInt8] {
        let head = WebSocketFrameHead.bytes(first: first, length: declared ?? UInt64(payload.count), key: key)
        guard let key else { return head + payload }
        return head + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    /// What the splitter hands on for `bytes` read in pieces cut at `cuts` (offsets), piece by piece.
    static func split(_ bytes: [UInt8], cuts: [Int], knowsRSV1: Bool = true, maxFrameSize: Int = 1 << 20) -> [[UInt8]] {
        var splitter = FrameSplitter(maxFragment: bound, maxFrameSize: maxFrameSize, knowsRSV1: knowsRSV1)
        var out: [[UInt8]] = []
        let edges = [0] + cuts.sorted() + [bytes.count]
        for (start, end) in zip(edges, edges.dropFirst()) where start < end {
            var input = ByteBuffer(bytes: bytes[start..<end])
            while let piece = splitter.next(from: &input) { out.append(Array(piece.readableBytesView)) }
            #expect(input.readableBytes == 0, "a read is taken whole")
        }
        return out
    }

    static func randomCuts(_ count: Int, in length: Int, using generator: inout some RandomNumberGenerator) -> [Int] {
        (0..<count).map { _ in Int.random(in: 0...length, using: &generator) }
    }

    static func payload(_ count: Int, seed: UInt8 = 0) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) &+ seed } }

    /// Frames that pass as they came, whatever their size: at or under the bound, control frames, RSV bits no agreed
    /// extension defines, and frames over the decoder's limit (which it refuses at their header).
    static var passing: [UInt8] {
        let key: [UInt8] = [0x11, 0x22, 0x33, 0x44]
        return frame(0x81, payload(0), key: key) + frame(0x81, payload(5), key: key) + frame(0x02, payload(bound))
            + frame(0x80, payload(bound), key: key) + frame(0x89, payload(125)) + frame(0x8A, payload(3), key: key)
            + frame(0x88, [0x03, 0xE8]) + frame(0xA2, payload(bound * 3)) + frame(0x92, payload(bound * 2), key: key)
    }

    @Test("frames that are not cut reach the decoder byte for byte, however the reads cut them; a read of whole frames goes on as one piece")
    func uncutFramesPassAsTheyCame() {
        var generator = SystemRandomNumberGenerator()
        let bytes = Self.passing
        #expect(Self.split(bytes, cuts: []).count == 1)
        #expect(Array(Self.split(bytes, cuts: Array(0..<bytes.count)).joined()) == bytes, "one byte at a time")
        for _ in 0..<300 {
            let cuts = Self.randomCuts(Int.random(in: 1...12, using: &generator), in: bytes.count, using: &generator)
            #expect(Array(Self.split(bytes, cuts: cuts).joined()) == bytes, "cut at \(cuts.sorted())")
        }
        // RSV1 with no permessage-deflate agreed: not known, so not cut.
        let compressed = Self.frame(0xC1, Self.payload(Self.bound * 5))
        #expect(Array(Self.split(compressed, cuts: [3, 70], knowsRSV1: false).joined()) == compressed)
        // Over the decoder's limit: the header goes on as it came, and the decoder refuses it.
        let huge = Self.frame(0x82, [], key: [1, 2, 3, 4], declaring: 1 << 40)
        #expect(Array(Self.split(huge, cuts: [5], maxFrameSize: Self.bound * 100).joined()) == huge)
    }

    /// Decodes `bytes` with NIO's decoder limited to `maxFrameSize`.
    static func decode(_ pieces: [[UInt8]], maxFrameSize: Int = bound) throws -> [WebSocketFrame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
        for piece in pieces { try channel.writeInbound(ByteBuffer(bytes: piece)) }
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        _ = try channel.finish()
        return frames
    }

    @Test("a big data frame becomes fragments within the bound: opcode and RSV1 on the first, FIN on the last, the masking key on each, the payload bytes as they came")
    func bigFramesAreCut() throws {
        var generator = SystemRandomNumberGenerator()
        let key: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4]
        let text = Self.payload(Self.bound * 10 + 6, seed: 1)
        let binary = Self.payload(Self.bound * 3 + 1, seed: 2)
        let continued = Self.payload(Self.bound * 2, seed: 3)
        // A compressed text message whose first frame is big, a ping between, a big unmasked binary frame that
        // starts a fragmented message, a big continuation that ends it.
        let bytes = Self.frame(0xC1, text, key: key) + Self.frame(0x89, [9]) + Self.frame(0x02, binary)
            + Self.frame(0x80, continued, key: key)
        for round in 0..<200 {
            let cuts = round == 0 ? [] : Self.randomCuts(Int.random(in: 1...20, using: &generator), in: bytes.count, using: &generator)
            let frames = try Self.decode(Self.split(bytes, cuts: cuts))
            #expect(frames.count == 11 + 1 + 4 + 2, "cut at \(cuts.sorted())")
            guard frames.count == 18 else { continue }
            let textFrames = Array(frames[0..<11]), binaryFrames = Array(frames[12..<16]), lastFrames = Array(frames[16..<18])
            #expect(textFrames.map(\.opcode) == [.text] + Array(repeating: .continuation, count: 10))
            #expect(textFrames.map(\.rsv1) == [true] + Array(repeating: false, count: 10))
            #expect(textFrames.map(\.fin) == Array(repeating: false, count: 10) + [true])
            #expect(textFrames.allSatisfy { $0.maskKey == WebSocketMaskingKey(key) })
            #expect(textFrames.map(\.length) == Array(repeating: Self.bound, count: 10) + [6])
            #expect(textFrames.flatMap { Array($0.unmaskedData.readableBytesView) } == text)
            #expect(textFrames.flatMap { Array($0.data.readableBytesView) } == Array(Self.frame(0xC1, text, key: key).suffix(text.count)),
                    "the payload bytes go on masked as they came")
            #expect(frames[11].opcode == .ping && frames[11].fin)
            #expect(binaryFrames.map(\.opcode) == [.binary, .continuation, .continuation, .continuation])
            #expect(binaryFrames.allSatisfy { !$0.fin && $0.maskKey == nil && !$0.rsv1 })
            #expect(binaryFrames.flatMap { Array($0.data.readableBytesView) } == binary)
            #expect(lastFrames.map(\.opcode) == [.continuation, .continuation] && lastFrames.map(\.fin) == [false, true])
            #expect(lastFrames.flatMap { Array($0.unmaskedData.readableBytesView) } == continued)
        }
    }

    @Test("a reserved data opcode is cut too (the session ends at its first fragment); RSV2 and RSV3 are not")
    func reservedBits() throws {
        let reserved = try Self.decode(Self.split(Self.frame(0x83, Self.payload(Self.bound * 2)), cuts: [10]))
        #expect(reserved.map { UInt8(webSocketOpcode: $0.opcode) } == [3, 0])
        for first: UInt8 in [0xA2, 0x92, 0xE2] {
            let bytes = Self.frame(first, Self.payload(Self.bound * 2))
            #expect(Array(Self.split(bytes, cuts: [10]).joined()) == bytes)
        }
    }

    @Test("a session is re-fragmented with no extension or only permessage-deflate agreed, never under another")
    func allowedExtensions() {
        #expect(FrameSplitter.allowed(extensions: []))
        #expect(FrameSplitter.allowed(extensions: ["permessage-deflate; client_max_window_bits=10"]))
        #expect(FrameSplitter.allowed(extensions: [" Permessage-Deflate ;server_no_context_takeover"]))
        #expect(!FrameSplitter.allowed(extensions: ["permessage-deflate, x-webkit-deflate-frame"]))
        #expect(!FrameSplitter.allowed(extensions: ["x-custom"]))
        #expect(!FrameSplitter.allowed(extensions: ["permessage-deflate", "foo; bar=1"]))
    }
}
