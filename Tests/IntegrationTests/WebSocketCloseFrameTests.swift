import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// Close frames whose payload breaks RFC 6455 (§5.5.1, §7.4) fail the session like any bad frame: each end gets
/// hookproxy's close frame saying why (1002, or 1007 for a reason that is not UTF-8), the bad one goes nowhere.
/// Before, they were relayed as they came, and the receiver had to fail the connection on hookproxy's word.
@Suite("WebSocket close frames that break RFC 6455 (issue 15)", .timeLimit(.minutes(3)))
struct WebSocketCloseFrameTests {
    static let badPayloads: [(String, [UInt8], Int, String)] = [
        ("a 1-byte payload", [0x03], 1002, "a close frame with a 1-byte payload"),
        ("code 1005", [0x03, 0xED], 1002, "a close frame with code 1005, which no endpoint sends"),
        ("code 999", [0x03, 0xE7], 1002, "a close frame with code 999, which no endpoint sends"),
        ("code 2000", [0x07, 0xD0], 1002, "a close frame with code 2000, which no endpoint sends"),
        ("code 5000", [0x13, 0x88], 1002, "a close frame with code 5000, which no endpoint sends"),
        ("a reason that is not UTF-8", [0x03, 0xE8, 0xC3, 0x28], 1007, "a close frame whose reason is not UTF-8"),
    ]

    @Test("from the client: the session fails, both ends get hookproxy's close frame", arguments: badPayloads)
    func fromTheClient(name: String, payload: [UInt8], code: Int, what: String) async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: server.port)
                try await client.send(WebSocketWire.frame(opcode: 8, payload))
                let frames = WebSocketWire.frames(try await client.readToEOF())
                client.close()
                #expect(frames.map(\.closeCode) == [code], "\(name): \(frames)")
                #expect(frames.first?.closeReason.hasPrefix("hookproxy: bad frame from the client: \(what)") == true,
                        "\(name): \(String(describing: frames.first?.closeReason))")
                #expect(await eventually(timeout: .seconds(20)) { server.records.clientCloseCodes == [code] },
                        "\(name): the server gets hookproxy's close, not the bad one: \(server.records.clientCloseCodes)")
                let record = try #require(await WebSocketAdversarialTests.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == code && record.webSocket?.close?.by == .client, "\(name)")
            }
        }
    }

    @Test("from the server: the session fails, both ends get hookproxy's close frame", arguments: badPayloads)
    func fromTheServer(name: String, payload: [UInt8], code: Int, what: String) async throws {
        let script: [MisbehavingOrigin.Step] = [
            .send(Array(WebSocketAdversarialTests.accept.utf8) + WebSocketWire.frame(opcode: 8, payload, masked: false)), .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port)
                let frames = WebSocketWire.frames(try await client.readToEOF())
                client.close()
                #expect(frames.map(\.closeCode) == [code], "\(name): \(frames)")
                #expect(frames.first?.closeReason.hasPrefix("hookproxy: bad frame from the server: \(what)") == true,
                        "\(name): \(String(describing: frames.first?.closeReason))")
                #expect(await eventually(timeout: .seconds(20)) {
                    WebSocketWire.framesAfterHead(origin.received).map(\.closeCode) == [code]
                }, "\(name): the server gets hookproxy's close")
            }
        }
    }

    @Test("close frames that keep the rules pass unchanged: no payload, 1012, 3000, 4999, a UTF-8 reason",
          arguments: [[], [0x03, 0xF4], [0x0B, 0xB8], [0x13, 0x87], [0x03, 0xE8] + Array("déjà vu".utf8)] as [[UInt8]])
    func goodCloseFramesPass(payload: [UInt8]) async throws {
        let script: [MisbehavingOrigin.Step] = [.send(Array(WebSocketAdversarialTests.accept.utf8)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.webSocket(through: proxy, to: origin.port)
                defer { client.close() }
                try await client.send(WebSocketWire.frame(opcode: 8, payload))
                #expect(await eventually(timeout: .seconds(20)) {
                    WebSocketWire.framesAfterHead(origin.received).map(\.payload) == [payload]
                }, "\(payload): \(WebSocketWire.framesAfterHead(origin.received))")
            }
        }
    }
}
