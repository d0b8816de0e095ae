import NIOCore
import NIOWebSocket
@testable import ProxyServer
import Testing

/// RFC 6455's masking and RSV rules for one frame (`FrameRules`), for each thing a 101 can agree, and the close
/// frames hookproxy writes and the rules a relayed one keeps (`CloseFrame`).
struct FrameRulesTests {
    static let key = WebSocketMaskingKey([1, 2, 3, 4])!

    static func frame(_ opcode: WebSocketOpcode = .text, fin: Bool = true, rsv: (Bool, Bool, Bool) = (false, false, false),
                      masked: Bool) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv.0, rsv2: rsv.1, rsv3: rsv.2, opcode: opcode, maskKey: masked ? key : nil,
                       data: ByteBuffer(string: "x"))
    }

    @Test func whatThe101AgreedDecidesWhichRSVBitsMayBeSet() {
        #expect(FrameRules(serverAnswer: []).extensions == .none)
        #expect(FrameRules(serverAnswer: ["permessage-deflate; client_max_window_bits=10"]).extensions == .deflate)
        #expect(FrameRules(serverAnswer: ["x-webkit-deflate-frame"]).extensions == .unknown)
        #expect(FrameRules(serverAnswer: ["permessage-deflate, x-custom"]).extensions == .unknown)
    }

    @Test func aClientMasksEveryFrameAndAServerNone() {
        for rules in [FrameRules(extensions: .none), FrameRules(extensions: .deflate), FrameRules(extensions: .unknown)] {
            for opcode in [WebSocketOpcode.text, .binary, .continuation, .ping, .pong, .connectionClose] {
                #expect(rules.violation(Self.frame(opcode, masked: true), fromClient: true) == nil)
                #expect(rules.violation(Self.frame(opcode, masked: false), fromClient: false) == nil)
                #expect(rules.violation(Self.frame(opcode, masked: false), fromClient: true)?.contains("unmasked") == true)
                #expect(rules.violation(Self.frame(opcode, masked: true), fromClient: false)?.contains("a masked frame") == true)
            }
        }
    }

    @Test(arguments: [(true, false, false), (false, true, false), (false, false, true), (true, true, true)])
    func withNoExtensionEveryRSVBitIsRefused(rsv: (Bool, Bool, Bool)) {
        let rules = FrameRules(extensions: .none)
        #expect(rules.violation(Self.frame(rsv: rsv, masked: true), fromClient: true)?.contains("RSV") == true)
        #expect(rules.violation(Self.frame(.ping, rsv: rsv, masked: false), fromClient: false)?.contains("RSV") == true)
        #expect(FrameRules(extensions: .unknown).violation(Self.frame(rsv: rsv, masked: true), fromClient: true) == nil)
    }

    @Test func permessageDeflateAllowsRSV1OnAMessagesFirstFrameOnly() {
        let rules = FrameRules(extensions: .deflate)
        for opcode in [WebSocketOpcode.text, .binary] {
            #expect(rules.violation(Self.frame(opcode, fin: false, rsv: (true, false, false), masked: true), fromClient: true) == nil)
            #expect(rules.violation(Self.frame(opcode, rsv: (true, false, false), masked: false), fromClient: false) == nil)
        }
        for opcode in [WebSocketOpcode.continuation, .ping, .pong, .connectionClose] {
            #expect(rules.violation(Self.frame(opcode, rsv: (true, false, false), masked: true), fromClient: true)?.contains("RSV1") == true,
                    "\(opcode)")
        }
        #expect(rules.violation(Self.frame(rsv: (false, true, false), masked: true), fromClient: true)?.contains("RSV2 or RSV3") == true)
        #expect(rules.violation(Self.frame(rsv: (true, false, true), masked: false), fromClient: false)?.contains("RSV2 or RSV3") == true)
    }

    @Test func aCloseFrameHoldsItsCodeAndTheReasonCutToWholeCharacters() throws {
        let short = CloseFrame.make(code: 1002, reason: "hookproxy: bad frame", allocator: ByteBufferAllocator())
        #expect(short.opcode == .connectionClose && short.fin && short.maskKey == nil)
        var data = short.data
        #expect(data.readInteger(as: UInt16.self) == 1002)
        #expect(data.readString(length: data.readableBytes) == "hookproxy: bad frame")

        // 122 ASCII bytes then a 2-byte character: the character does not fit, and is not cut in half.
        let long = String(repeating: "a", count: 122) + "é" + "and more"
        let frame = CloseFrame.make(code: 1009, reason: long, allocator: ByteBufferAllocator())
        #expect(frame.data.readableBytes == 2 + 122)
        for count in [0, 1, 122, 123, 124, 200] {
            let reason = String(repeating: "ü", count: count)  // 2 bytes each
            let fitted = CloseFrame.fitting(reason)
            #expect(fitted.utf8.count <= CloseFrame.maxReasonBytes)
            #expect(fitted.utf8.count == min(count * 2, 122), "\(count)")
        }
        #expect(CloseFrame.fitting(String(repeating: "b", count: 123)).utf8.count == 123)
        #expect(CloseFrame.fitting(String(repeating: "b", count: 124)).utf8.count == 123)
    }

    @Test func closeCodesAnEndpointMaySendAndOnesItMayNot() {
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1011, 1012, 1014, 3000, 4000, 4999] {
            #expect(CloseFrame.isSendable(code), "\(code)")
        }
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            #expect(!CloseFrame.isSendable(code), "\(code)")
        }
        #expect(CloseFrame.violation(ByteBuffer()) == nil)
        #expect(CloseFrame.violation(ByteBuffer(bytes: [0x03, 0xE8] + Array("fine ✓".utf8))) == nil)
        #expect(CloseFrame.violation(ByteBuffer(bytes: [0x03]))?.code == 1002)
        #expect(CloseFrame.violation(ByteBuffer(bytes: [0x03, 0xEE]))?.code == 1002)  // 1006
        #expect(CloseFrame.violation(ByteBuffer(bytes: [0x03, 0xE8, 0xFF]))?.code == 1007)
        // A reason cut inside a character is not UTF-8 either.
        #expect(CloseFrame.violation(ByteBuffer(bytes: [0x03, 0xE8] + Array("é".utf8).prefix(1)))?.code == 1007)
    }
}
