import NIOCore
import NIOWebSocket
@testable import ProxyServer
import Testing

/// `ServerFrameCodec`: NIO's decoder and encoder for the server's side of a session, read through its taps.
struct ServerFrameCodecTests {
    static func frame(_ text: String, opcode: WebSocketOpcode = .text, fin: Bool = true) -> WebSocketFrame {
        WebSocketFrame(fin: fin, opcode: opcode, data: ByteBuffer(string: text))
    }

    static func bytes(of frames: [WebSocketFrame]) throws -> ByteBuffer {
        let codec = try ServerFrameCodec(splitter: nil, maxFrameSize: 1 << 20)
        defer { codec.finish() }
        var all = ByteBuffer()
        for frame in frames {
            try codec.encode(frame) { buffer in
                var buffer = buffer
                all.writeBuffer(&buffer)
            }
        }
        return all
    }

    @Test func framesComeOutInOrderAcrossAnyCut() throws {
        let sent = [Self.frame("one"), Self.frame("two", opcode: .binary, fin: false), Self.frame("", opcode: .continuation),
                    Self.frame(String(repeating: "x", count: 70_000), opcode: .binary)]
        let wire = try Self.bytes(of: sent)
        for cut in [1, 2, 7, 100, wire.readableBytes] {
            let codec = try ServerFrameCodec(splitter: nil, maxFrameSize: 1 << 20)
            defer { codec.finish() }
            var received: [WebSocketFrame] = []
            var rest = wire
            while let piece = rest.readSlice(length: min(cut, rest.readableBytes)), piece.readableBytes > 0 {
                #expect(codec.decode(piece) { received.append($0) } == nil)
            }
            #expect(received == sent, "cut every \(cut) bytes")
        }
    }

    @Test func framesBeforeABadOneStillComeThenTheError() throws {
        let codec = try ServerFrameCodec(splitter: nil, maxFrameSize: 1 << 20)
        defer { codec.finish() }
        var wire = try Self.bytes(of: [Self.frame("good")])
        wire.writeBytes([0x82, 127, 0, 0, 0, 0, 0, 0x20, 0, 0])  // a binary frame of 2 MiB, over the limit
        var received: [WebSocketFrame] = []
        let error = codec.decode(wire) { received.append($0) }
        #expect(received == [Self.frame("good")])
        #expect(error != nil)
    }

    @Test func aMaskedFrameKeepsItsKey() throws {
        var frame = Self.frame("masked")
        frame.maskKey = WebSocketMaskingKey([1, 2, 3, 4])
        let codec = try ServerFrameCodec(splitter: nil, maxFrameSize: 1 << 20)
        defer { codec.finish() }
        var received: [WebSocketFrame] = []
        #expect(codec.decode(try Self.bytes(of: [frame])) { received.append($0) } == nil)
        #expect(received.map(\.maskKey) == [frame.maskKey])
        #expect(received.map(\.unmaskedData) == [ByteBuffer(string: "masked")])
    }

    /// What the caller does with a frame may end the session, and the codec with it: the frames left are still
    /// handed on (the caller skips them), and nothing runs inside the finished decoder.
    @Test func finishingFromInsideTheCallbackIsSafe() throws {
        let codec = try ServerFrameCodec(splitter: nil, maxFrameSize: 1 << 20)
        var count = 0
        let error = codec.decode(try Self.bytes(of: [Self.frame("a"), Self.frame("b"), Self.frame("c")])) { _ in
            count += 1
            if count == 1 { codec.finish() }
        }
        #expect(count == 3)
        #expect(error == nil)
    }
}
