import Foundation
import Synchronization
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// WebSocket and other upgrades against a hostile client (raw bytes, `RawClient`) and a hostile upstream
/// (`MisbehavingOrigin`, a server that never reads): bad frames, bad handshakes, peers that vanish, shutdown, and
/// the proxy's sockets counted afterwards (`SocketCensus`), so nothing leaks.
@Suite("WebSocket against hostile peers (issue 15)", .timeLimit(.minutes(3)))
struct WebSocketAdversarialTests {
    static let accept = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"

    /// The session's record (the one written at its end).
    static func sessionRecord(_ proxy: ProxyHarness) async -> FlowRecord? {
        _ = await eventually(timeout: .seconds(20)) {
            proxy.recorder.records.contains { $0.webSocket?.isOpening == false }
        }
        return proxy.recorder.records.first { $0.webSocket?.isOpening == false }
    }

    /// Whether the proxy let go of every socket it held for `upstreamPort` and its clients.
    static func socketsReleased(_ proxy: ProxyHarness, upstreamPort: Int) async -> Bool {
        await eventually(timeout: .seconds(20)) {
            SocketCensus.count(localPort: proxy.port) == 0 && SocketCensus.count(remotePort: upstreamPort) == 0
        }
    }

    @Test("frames the client sends before the 101 arrives reach the server, in order, after the handshake")
    func framesBefore101() async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                let head = WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)")
                try await client.send(Array(head.utf8) + WebSocketWire.text("early one"))
                try await client.send(WebSocketWire.text("early two"))
                let response = try await client.readResponse()
                #expect(response.status == 101)
                let echoed = try await client.read(atLeast: 22)
                #expect(WebSocketWire.payloads(echoed) == [Array("early one".utf8), Array("early two".utf8)])
                client.close()
                #expect(await Self.socketsReleased(proxy, upstreamPort: server.port))
            }
        }
    }

    /// Frames a client may not send: NIO's decoder refuses the first two, `FrameRules` the others.
    static let badClientFrames: [(String, [UInt8])] = [
        ("fragmented ping", WebSocketWire.fragmentedPing()), ("2^40-byte frame", WebSocketWire.hugeFrameHead()),
        ("unmasked frame", WebSocketWire.text("bare", masked: false)),
        ("RSV1 with no extension", WebSocketWire.frame(opcode: 1, Array("hi".utf8), rsv: 4)),
        ("RSV3 on a ping", WebSocketWire.frame(opcode: 9, [], rsv: 1)),
    ]

    @Test("a malformed, oversized or unmasked frame from the client, or one with an RSV bit no extension defines, fails the session: a close frame 1002 to both ends, a clear log; the proxy serves on",
          arguments: badClientFrames)
    func badClientFrame(name: String, frame: [UInt8]) async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                try await client.send(WebSocketWire.text("fine") + frame)
                // The echo of "fine" may come before the close frame; nothing comes after it.
                let frames = WebSocketWire.frames(try await client.readToEOF())
                client.close()  // as a client does after the close frame: hookproxy lingers until then (LingeringClose)
                let close = try #require(frames.last, "\(name): the client gets a close frame")
                #expect(close.closeCode == 1002 && close.closeReason.hasPrefix("hookproxy: bad frame from the client: "),
                        "\(name): \(close.closeReason)")
                #expect(close.payload.count <= 125 && !close.masked)
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1002, "\(name)")
                #expect(record.webSocket?.close?.reason.contains("bad frame from the client") == true,
                        "\(name): \(String(describing: record.webSocket?.close))")
                #expect(record.webSocket?.sentMessages == 1)
                #expect(await eventually(timeout: .seconds(20)) { server.records.clientCloseCodes == [1002] },
                        "\(name): the server gets the close frame too: \(server.records.clientCloseCodes)")
                #expect(await Self.socketsReleased(proxy, upstreamPort: server.port))
                // The proxy still works.
                let next = try await RawClient.connect(port: proxy.port)
                try await next.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await next.readResponse().status == 101)
                try await next.send(WebSocketWire.text("again"))
                #expect(WebSocketWire.payloads(try await next.read(atLeast: 7)) == [Array("again".utf8)])
            }
        }
    }

    /// Frames a server may not send: NIO's decoder refuses the first two, `FrameRules` the others.
    static let badServerFrames: [(String, [UInt8])] = [
        ("fragmented ping", WebSocketWire.fragmentedPing(masked: false)),
        ("2^40-byte frame", WebSocketWire.hugeFrameHead(masked: false)),
        ("masked frame", WebSocketWire.text("veiled", masked: true)),
        ("RSV1 with no extension", WebSocketWire.frame(opcode: 2, [1, 2, 3], masked: false, rsv: 4)),
        ("RSV2 on a close", WebSocketWire.frame(opcode: 8, [3, 232], masked: false, rsv: 2)),
    ]

    @Test("a malformed, oversized or masked frame from the server, or one with an RSV bit no extension defines, right after its 101 in the same packet, fails the session: a close frame 1002 to both ends",
          arguments: badServerFrames)
    func badServerFrame(name: String, frame: [UInt8]) async throws {
        let script: [MisbehavingOrigin.Step] = [.send(Array(Self.accept.utf8) + WebSocketWire.text("first", masked: false) + frame), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                #expect(try await client.readResponse().status == 101)
                let frames = WebSocketWire.frames(try await client.readToEOF())
                client.close()  // as a client does after the close frame: hookproxy lingers until then (LingeringClose)
                #expect(frames.map(\.opcode) == [1, 8], "\(name): the frame before the bad one, then the close")
                #expect(frames.first?.payload == Array("first".utf8))
                #expect(frames.last?.closeCode == 1002 && frames.last?.closeReason.hasPrefix("hookproxy: bad frame from the server: ") == true,
                        "\(name): \(String(describing: frames.last?.closeReason))")
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1002)
                #expect(record.webSocket?.close?.by == .server)
                #expect(record.webSocket?.close?.reason.contains("bad frame from the server") == true,
                        "\(name): \(String(describing: record.webSocket?.close))")
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                // The server got the close frame (masked, as a client's), after the handshake.
                let toServer = WebSocketWire.framesAfterHead(origin.received)
                #expect(toServer.count == 1 && toServer.first?.masked == true && toServer.first?.closeCode == 1002,
                        "\(name): \(toServer)")
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    /// Found by a hostile review: closing a socket with the client's bytes unread in it makes the kernel reset the
    /// connection, and the reset destroyed the frames and the close frame still on their way to the client.
    @Test("a client still sending when its session fails gets every frame before the failure, then the close frame: no reset destroys them")
    func failsWhileTheClientSends() async throws {
        let goods = (0..<40).flatMap { WebSocketWire.frame(opcode: 2, [UInt8](repeating: UInt8($0), count: 65536), masked: false) }
        let script: [MisbehavingOrigin.Step] = [.send(Array(Self.accept.utf8)), .pause(milliseconds: 300),
                                                .send(goods + WebSocketWire.text("veiled", masked: true)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), receiveBuffer: 16384)
                defer { client.close() }
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                #expect(try await client.readResponse().status == 101)
                // It sends for 1.5 s without reading; the session fails meanwhile.
                let chatter = WebSocketWire.frame(opcode: 2, [UInt8](repeating: 7, count: 4096))
                let until = ContinuousClock.now + .milliseconds(1500)
                var sendFailed: (any Error)?
                while ContinuousClock.now < until, sendFailed == nil {
                    do { try await client.send(chatter) } catch { sendFailed = error }
                    try await Task.sleep(for: .milliseconds(1))
                }
                #expect(sendFailed == nil, "the proxy reset the connection: \(String(describing: sendFailed))")
                let frames = WebSocketWire.frames(try await client.readToEOF())
                #expect(frames.filter { $0.opcode == 2 }.count == 40, "\(frames.count) frames")
                #expect(frames.last?.closeCode == 1002 && frames.last?.closeReason.contains("a masked frame") == true)
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1002)
            }
        }
    }

    @Test("a server still sending, and not reading, when the session fails gets every frame before the failure, then the close frame")
    func failsWhileTheServerSends() async throws {
        let chatter = WebSocketWire.frame(opcode: 2, [UInt8](repeating: 7, count: 4096), masked: false)
        let server = try NonReadingServer(answer: Self.accept, readingAfter: .milliseconds(1500), chatter: chatter)
        defer { server.stop() }
        try await withProxy { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
            defer { client.close() }
            try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
            #expect(try await client.readResponse().status == 101)
            let goods = (0..<40).flatMap { WebSocketWire.frame(opcode: 2, [UInt8](repeating: UInt8($0), count: 65536)) }
            try await client.send(goods + WebSocketWire.text("bare", masked: false))
            #expect(await eventually(timeout: .seconds(20)) { server.readToEnd })
            let frames = WebSocketWire.frames(server.bytesAfterHead)
            #expect(frames.filter { $0.opcode == 2 }.count == 40, "\(frames.count) frames, \(server.receivedAfterHead) bytes")
            #expect(frames.last?.closeCode == 1002 && frames.last?.masked == true, "\(String(describing: frames.last))")
        }
    }

    @Test("a failure after the other side's close frame: the log keeps that close and says why hookproxy failed the session")
    func failureAfterAClose() async throws {
        let script: [MisbehavingOrigin.Step] = [.send(Array(Self.accept.utf8) + WebSocketWire.close(1000, "srvbye", masked: false)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                defer { client.close() }
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                #expect(try await client.readResponse().status == 101)
                #expect(WebSocketWire.frames(try await client.read(atLeast: 10)).first?.closeReason == "srvbye")
                try await client.send(WebSocketWire.text("bare", masked: false))
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1000 && record.webSocket?.close?.reason == "srvbye")
                let notes = record.events.map(\.action)
                #expect(notes.contains { $0.hasPrefix("hookproxy failed the session after that close frame: 1002 hookproxy: bad frame from the client: an unmasked frame") },
                        "\(notes)")
                #expect(await eventually(timeout: .seconds(10)) { WebSocketWire.framesAfterHead(origin.received).first?.closeCode == 1002 })
            }
        }
    }

    /// Found by a hostile review: an open session has no idle timeout, so a client that stopped reading while the
    /// server still had data held the session, its sockets and the server for good.
    @Test("an open session whose client takes none of what waits for it is ended after --idle-timeout; its server gets a close frame 1001")
    func openSessionClientStalls() async throws {
        let frames = (0..<128).flatMap { _ in WebSocketWire.frame(opcode: 2, [UInt8](repeating: 1, count: 65536), masked: false) }
        let script: [MisbehavingOrigin.Step] = [.send(Array(Self.accept.utf8) + frames), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 2000 }) { proxy in
                // Connecting, sending and reading the 101 in one step: a busy cooperative pool can hold a test
                // between two awaits for longer than the timeout.
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), receiveBuffer: 16384,
                                                         sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/",
                                                                                          host: "127.0.0.1:\(origin.port)"))
                defer { client.close() }
                #expect(try await client.run { try $0.readResponseNow().status } == 101)
                // The client reads nothing more.
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.by == .client)
                #expect(record.webSocket?.close?.reason == "the client took nothing for 2.0 s (--idle-timeout) of what the server sent",
                        "\(String(describing: record.webSocket?.close))")
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                // The server is told, not reset.
                let told = WebSocketWire.framesAfterHead(origin.received).last
                #expect(told?.closeCode == 1001 && told?.closeReason == "hookproxy: \(record.webSocket?.close?.reason ?? "")",
                        "\(String(describing: told))")
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    @Test("frames a side sends after its close frame are dropped, bytes that are no frame too, and the log says how many")
    func framesAfterClose() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .send(Array(Self.accept.utf8) + WebSocketWire.close(1000, "bye", masked: false)
                  + WebSocketWire.text("late", masked: false) + WebSocketWire.frame(opcode: 9, [], masked: false)
                  + WebSocketWire.hugeFrameHead(masked: false)),
            .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                #expect(try await client.readResponse().status == 101)
                let close = WebSocketWire.frames(try await client.read(atLeast: 7))
                #expect(close.map(\.opcode) == [8] && close.first?.closeCode == 1000 && close.first?.closeReason == "bye")
                // The client answers the close, then (wrongly) sends on.
                try await client.send(WebSocketWire.close(1000, "bye too") + WebSocketWire.text("after")
                                      + WebSocketWire.fragmentedPing())
                #expect(await eventually(timeout: .seconds(20)) { !WebSocketWire.framesAfterHead(origin.received).isEmpty })
                client.close()
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.code == 1000 && record.webSocket?.close?.by == .server)
                let toServer = WebSocketWire.framesAfterHead(origin.received)
                #expect(toServer.map(\.opcode) == [8] && toServer.first?.closeReason == "bye too", "\(toServer)")
                let notes = record.events.map(\.action)
                #expect(notes.contains("hookproxy dropped 3 frames the server sent after its close frame (RFC 6455 §5.5.1: nothing follows a close frame)"), "\(notes)")
                #expect(notes.contains("hookproxy dropped 2 frames the client sent after its close frame (RFC 6455 §5.5.1: nothing follows a close frame)"), "\(notes)")
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    @Test("an upstream that answers the handshake with garbage, a truncated head, or a close: 502, and nothing leaks",
          arguments: [("garbage", [MisbehavingOrigin.Step.text("SSH-2.0-OpenSSH_9.2\r\n\r\n"), .hang]),
                      ("truncated head", [.text("HTTP/1.1 101 Switching Protocols\r\nUpgrade: webs"), .close]),
                      ("close", [.close]),
                      ("reset", [.reset])])
    func badHandshakeAnswer(name: String, script: [MisbehavingOrigin.Step]) async throws {
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                let response = try await client.readResponse()
                #expect(response.status == 502, "\(name): \(response.rawHead)")
                #expect(await client.waitForClose())
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.status == 502, "\(name)")
                #expect(records.first?.webSocket == nil)
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 }, "\(name)")
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port), "\(name)")
            }
        }
    }

    @Test("a TLS upstream that resets the connection, during the handshake or the session: 502 or a closed session",
          arguments: [false, true])
    func tlsUpstreamResets(afterSwitch: Bool) async throws {
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([ca.root], to: "R.pem")
        let store = try Hooks.store(directory, "rules:\n  - name: trust-test-root\n    match: { host: localhost }\n    trust: { ca_file: \(root) }\n")
        let script: [MisbehavingOrigin.Step] = afterSwitch ? [.text(Self.accept), .pause(milliseconds: 50), .reset] : [.reset]
        try await MisbehavingOrigin.with(script, tls: ca.identity([ca.leaf, ca.intermediate])) { origin in
            try await withHookProxy(rules: store) { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("https://localhost:\(origin.port)/", host: "localhost:\(origin.port)"))
                let response = try await client.readResponse()
                #expect(response.status == (afterSwitch ? 101 : 502), "\(response.rawHead)")
                #expect(await client.waitForClose())
                client.close()  // as a client does at the end: after a session hookproxy lingers until then (LingeringClose)
                if afterSwitch {
                    let record = try #require(await Self.sessionRecord(proxy))
                    #expect(record.webSocket?.close?.by == .server)
                }
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    @Test("an upstream that never answers the handshake: 504 after the idle timeout, not a wait without end")
    func silentUpstream() async throws {
        try await MisbehavingOrigin.with([.hang]) { origin in
            try await withProxy({ $0.upstream.idleTimeoutMs = 1000 }) { proxy in
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                let response = try await client.readResponse()
                #expect(response.status == 504)
                #expect(response.bodyText.hasPrefix("hookproxy: timeout waiting for 127.0.0.1:\(origin.port): "), "\(response.bodyText)")
                #expect(await client.waitForClose())
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    /// A bare `=` parameter in the server's `Sec-WebSocket-Extensions` indexed an empty split and stopped the proxy
    /// process ("Index out of range", release builds too), whatever the rules. Found by a review helper.
    @Test("a 101 whose Sec-WebSocket-Extensions holds a bare '=' starts the session; the proxy serves on",
          arguments: ["permessage-deflate;=", "permessage-deflate;==", "permessage-deflate; x=1;="])
    func bareEqualsExtensionParameter(extensions: String) async throws {
        let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: \(extensions)\r\n\r\n"
        try await MisbehavingOrigin.with([.text(answer), .pause(milliseconds: 2000), .close]) { origin in
            try await withProxyAndOrigin { proxy, good in
                let head = try await withRawClient(proxy, readTimeout: .seconds(10)) { client in
                    try await client.send(rawRequest("GET \(origin.baseURL)/ws HTTP/1.1", [
                        "Host: 127.0.0.1:\(origin.port)", "Upgrade: websocket", "Connection: Upgrade",
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                        "Sec-WebSocket-Extensions: permessage-deflate",
                    ]))
                    return try await client.readResponse()
                }
                #expect(head.status == 101, "\(head.rawHead)")
                try await expectProxyStillServes(proxy, good)
            }
        }
    }

    @Test("a 101 without Upgrade, or naming another protocol, is no WebSocket: 502, and no session starts",
          arguments: ["HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n",
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"])
    func unnamed101(answer: String) async throws {
        try await MisbehavingOrigin.with([.text(answer + "after"), .hang]) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                let response = try await client.readResponse()
                #expect(response.status == 502, "\(response.rawHead)")
                #expect(await client.waitForClose())
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.status == 502)
                #expect(records.first?.webSocket == nil)
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
            }
        }
    }

    @Test("a 101 to a request that asked no upgrade (Connection without upgrade, HTTP/1.0, a body): never relayed as a 101",
          arguments: [
            WebSocketWire.handshake("http://127.0.0.1:PORT/", host: "127.0.0.1:PORT", connection: "keep-alive"),
            WebSocketWire.handshake("http://127.0.0.1:PORT/", host: "127.0.0.1:PORT", version: "HTTP/1.0"),
            WebSocketWire.handshake("http://127.0.0.1:PORT/", host: "127.0.0.1:PORT", extra: ["Content-Length: 4"]) + "body",
          ])
    func unaskedSwitch(request: String) async throws {
        try await MisbehavingOrigin.with([.text(Self.accept + "after"), .hang]) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(request.replacingOccurrences(of: "PORT", with: "\(origin.port)"))
                let response = try await client.readResponse()
                #expect(response.status == 502, "\(response.rawHead)")
                #expect(await client.waitForClose())
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    @Test("a refused handshake's long answer to a client that does not read: the upstream is held back")
    func refusedAnswerBackpressure() async throws {
        try await withOrigin { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                let size = 256 * 1024 * 1024
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/bytes/\(size)", host: "127.0.0.1:\(origin.port)"))
                // The client reads nothing: what the origin manages to send is bounded by buffers, not by the body.
                #expect(await eventually(timeout: .seconds(20)) { origin.bytesStreamed > 0 })
                var last = -1
                _ = await eventually(timeout: .seconds(30), interval: .milliseconds(500)) {
                    let now = origin.bytesStreamed
                    defer { last = now }
                    return now == last
                }
                #expect(origin.bytesStreamed < 64 * 1024 * 1024, "the proxy read \(origin.bytesStreamed) bytes the client did not take")
                client.close()
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
            }
        }
    }

    @Test("a client that stops reading a refused handshake's answer is let go after --idle-timeout, with its upstream")
    func refusedAnswerIdle() async throws {
        try await withOrigin { origin in
            try await withProxy({ $0.limits.clientIdleTimeoutMs = 1000 }) { proxy in
                // One step: a silent connection is closed after --idle-timeout (1 s), a pause a busy pool can make.
                let client = try await RawClient.connect(
                    port: proxy.port,
                    sending: WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/bytes/\(256 * 1024 * 1024)", host: "127.0.0.1:\(origin.port)"))
                #expect(await eventually(timeout: .seconds(20)) { origin.bytesStreamed > 0 })
                // The client stays connected and reads nothing: the proxy gives up on it, and on the server's answer.
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
                let records = await Hooks.records(proxy)
                #expect(records.first?.error?.contains("client closed") == true, "\(String(describing: records.first?.error))")
                client.close()
            }
        }
    }

    @Test("a client that vanishes mid-handshake or mid-message: the upstream connection closes, no socket stays")
    func clientVanishes() async throws {
        try await MisbehavingOrigin.with([.hang]) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(origin.port)/", host: "127.0.0.1:\(origin.port)"))
                #expect(await eventually(timeout: .seconds(20)) { String(decoding: origin.received, as: UTF8.self).contains("\r\n\r\n") })
                client.close()
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                #expect(await Self.socketsReleased(proxy, upstreamPort: origin.port))
                let records = await Hooks.records(proxy)
                #expect(records.first?.error?.contains("client closed") == true, "\(String(describing: records.first?.error))")
            }
        }
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                try await client.send(Array(WebSocketWire.text(String(repeating: "x", count: 1000)).prefix(300)))
                client.close()
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.webSocket?.close?.by == .client)
                #expect(await Self.socketsReleased(proxy, upstreamPort: server.port))
            }
        }
    }

    @Test("a server that never reads: the client's writes stall at a bound, and what the proxy holds for the server is given up after --idle-timeout once the client left")
    func serverNeverReads() async throws {
        let server = try NonReadingServer(answer: Self.accept)
        defer { server.stop() }
        try await withProxy({ $0.upstream.idleTimeoutMs = 1000 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(3))
            try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
            #expect(try await client.readResponse().status == 101)
            let frame = WebSocketWire.frame(opcode: 2, [UInt8](repeating: 7, count: 256 * 1024))
            let cap = 96 * 1024 * 1024
            var sent = 0
            // A send that waits 3 s (SO_SNDTIMEO) throws: the proxy stopped taking bytes.
            while sent < cap, (try? await client.send(frame)) != nil { sent += frame.count }
            #expect(sent < cap, "the proxy took \(sent) bytes for a server that reads none")
            // The client leaves abruptly. (A plain close would queue its FIN behind the bytes the proxy is not
            // reading: the proxy learns of it only when the client's kernel gives the orphaned socket up, which takes
            // its zero-window probes ~25 s; that bound was what made this test flaky.)
            client.reset()
            #expect(await eventually(timeout: .seconds(20)) { SocketCensus.count(localPort: proxy.port) == 0 })
            // The proxy still holds bytes for the server, which takes none: it gives them up, not waits forever.
            #expect(await eventually(timeout: .seconds(20)) { SocketCensus.count(remotePort: server.port) == 0 })
        }
    }

    @Test("shutdown with sessions open ends them at once (it does not wait out the grace period)")
    func shutdownWithOpenSessions() async throws {
        try await TestWebSocketServer.with { server in
            let proxy = try await ProxyHarness.start { $0.limits.shutdownGraceMs = 600_000 }
            var clients: [RawClient] = []
            for _ in 0..<3 {
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                #expect(try await client.readResponse().status == 101)
                clients.append(client)
            }
            let stopped = Mutex(false)
            let stopping = Task {
                await proxy.stop()
                stopped.withLock { $0 = true }
            }
            let ended = await eventually(timeout: .seconds(30)) { stopped.withLock { $0 } }
            if !ended { stopping.cancel() }
            #expect(ended, "shutdown returned while sessions were open")
            for client in clients { #expect(await client.waitForClose()) }
            #expect(SocketCensus.count(remotePort: server.port) == 0)
        }
    }

    @Test("many sessions opened and abandoned, mid-handshake and mid-session: every socket is released")
    func manyAbandoned() async throws {
        try await TestWebSocketServer.with { server in
            try await MisbehavingOrigin.with([.hang]) { silent in
                try await withProxy { proxy in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for index in 0..<40 {
                            group.addTask {
                                let client = try await RawClient.connect(port: proxy.port)
                                if index % 2 == 0 {
                                    try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(server.port)/", host: "127.0.0.1:\(server.port)"))
                                    _ = try await client.readResponse()
                                    try await client.send(WebSocketWire.text("abandoned \(index)"))
                                    _ = try await client.read(atLeast: 4)
                                } else {
                                    try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(silent.port)/", host: "127.0.0.1:\(silent.port)"))
                                }
                                client.close()
                            }
                        }
                        try await group.waitForAll()
                    }
                    #expect(await Self.socketsReleased(proxy, upstreamPort: server.port))
                    #expect(await Self.socketsReleased(proxy, upstreamPort: silent.port))
                    #expect(await eventually(timeout: .seconds(20)) { silent.openConnections == 0 })
                }
            }
        }
    }
}

/// A server that accepts one connection, reads the request head, answers `answer`, and then never reads again
/// (its receive window fills); or, with `readingAfter`, reads again after that pause, slowly, to the end of the
/// connection (each wait bounded by 10 s), keeping the bytes after the head. With `chatter`, it sends those bytes
/// every millisecond during the pause (a server that talks while it does not read). Blocking sockets on a thread
/// of its own; `stop` closes everything.
final class NonReadingServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Accepted()

    /// The accepted connection's descriptor, and what the reading after the pause saw, shared with the thread.
    private final class Accepted: Sendable {
        let fd = Mutex<Int32>(-1)
        /// Bytes after the request head, and whether the connection ended (EOF, an error or the 10 s wait).
        let read = Mutex<(bytes: [UInt8], ended: Bool)>(([], false))
    }

    /// How many bytes were received after the request head (with `readingAfter`).
    var receivedAfterHead: Int { accepted.read.withLock { $0.bytes.count } }
    /// The bytes received after the request head (with `readingAfter`).
    var bytesAfterHead: [UInt8] { accepted.read.withLock { $0.bytes } }
    /// Whether the reading after the pause reached the end of the connection.
    var readToEnd: Bool { accepted.read.withLock { $0.ended } }

    init(answer: String, readingAfter pause: Duration? = nil, chatter: [UInt8]? = nil) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else { throw TestSupportError("NonReadingServer: bind: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
        let accepted = self.accepted
        Thread.detachNewThread {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            accepted.fd.withLock { $0 = fd }
            var head: [UInt8] = []
            var byte: UInt8 = 0
            while !head.suffix(4).elementsEqual([13, 10, 13, 10]), recv(fd, &byte, 1, 0) == 1 { head.append(byte) }
            _ = Array(answer.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard let pause else { return }
            let seconds = Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18
            if let chatter {
                let end = Date().addingTimeInterval(seconds)
                while Date() < end {
                    let sent = chatter.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                    if sent < 0 && errno != EAGAIN { break }
                    usleep(1000)
                }
            } else {
                Thread.sleep(forTimeInterval: seconds)
            }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = recv(fd, &chunk, chunk.count, 0)
                guard count > 0 else { break }
                accepted.read.withLock { $0.bytes += chunk[0..<count] }
                usleep(1000)  // a slow reader
            }
            accepted.read.withLock { $0.ended = true }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        accepted.fd.withLock { if $0 >= 0 { close($0) } }
    }
}
