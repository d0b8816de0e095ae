import NIOCore
import NIOEmbedded
@testable import ProxyServer
import Testing

/// `EarlySettings` on an `EmbeddedChannel`, the client's bytes in whole and cut at every length: the acknowledgement
/// goes in right after the client's first SETTINGS frame, the client's own acknowledgement comes out, and every
/// other byte passes in order. (The integration test is HTTP2HeaderBlockTests' 40 KB first request from curl.)
struct EarlySettingsTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let ack: [UInt8] = [0, 0, 0, 4, 1, 0, 0, 0, 0]

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt8 = 0, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags, 0, 0, 0, stream] + payload
    }

    /// What comes out of the handler when `input` goes in, `chunk` bytes per read.
    static func pass(_ input: [UInt8], chunk: Int) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: EarlySettings())
        var output: [UInt8] = []
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + chunk)
            try channel.writeInbound(ByteBuffer(bytes: input[offset..<end]))
            while var buffer = try channel.readInbound(as: ByteBuffer.self) { output += buffer.readBytes(length: buffer.readableBytes)! }
            offset = end
        }
        _ = try channel.finish()
        return output
    }

    @Test("the acknowledgement goes in after the client's SETTINGS, the client's own comes out")
    func swapsTheAcknowledgement() throws {
        let settings = Self.frame(type: 4, payload: [0, 3, 0, 0, 0, 100, 0, 4, 0, 0xFF, 0xFF, 0xFF])
        let windowUpdate = Self.frame(type: 8, payload: [0, 0x0F, 0, 1])
        let headers = Self.frame(type: 1, flags: 5, stream: 1, payload: Array(repeating: 0x82, count: 300))
        let data = Self.frame(type: 0, flags: 1, stream: 1, payload: Array(Self.ack))  // ACK-like bytes in a payload
        let laterSettings = Self.frame(type: 4, payload: [0, 4, 0, 0, 0, 1])
        let input = Self.preface + settings + windowUpdate + headers + data + Self.ack + laterSettings + Self.ack
        let expected = Self.preface + settings + Self.ack + windowUpdate + headers + data + laterSettings + Self.ack
        for chunk in [input.count, 1, 2, 7, 9, 10, 25, 33] {
            #expect(try Self.pass(input, chunk: chunk) == expected, "cut every \(chunk) bytes")
        }
    }

    @Test("an empty first SETTINGS frame is acknowledged at once")
    func emptySettings() throws {
        let headers = Self.frame(type: 1, flags: 5, stream: 1, payload: [0x82, 0x86])
        let input = Self.preface + Self.frame(type: 4, payload: []) + headers + Self.ack
        #expect(try Self.pass(input, chunk: 3) == Self.preface + Self.frame(type: 4, payload: []) + Self.ack + headers)
    }

    @Test("a client that does not start with SETTINGS passes untouched, for NIO to refuse")
    func notSettingsFirst() throws {
        let input = Self.preface + Self.frame(type: 1, flags: 5, stream: 1, payload: [0x82]) + Self.ack
        #expect(try Self.pass(input, chunk: 4) == input)
        let acknowledgementFirst = Self.preface + Self.ack + Self.frame(type: 4, payload: [])
        #expect(try Self.pass(acknowledgementFirst, chunk: 5) == acknowledgementFirst)
    }
}
