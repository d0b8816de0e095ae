import Foundation
import ProxyLog
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyUI
import ProxyTestSupport
import Testing

/// WebSocket through hookproxy (issue 15): a real server (SwiftNIO's WebSocket upgrader, `TestWebSocketServer`)
/// and a real, independent client (Python's `websockets`, `Scripts/ws_client.py`), through the proxy in process.
@Suite("WebSocket (issue 15)", .timeLimit(.minutes(3)))
struct WebSocketTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/ws_client.py").path

    /// Runs the client script and returns its JSON object.
    static func client(_ proxy: ProxyHarness, _ target: String, _ scenario: String, ca: String? = nil,
                       environment extra: [String: String] = [:],
                       timeout: Duration = .seconds(90)) async throws -> [String: Any] {
        let environment = extra.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(extra) { $1 }
        let run = try await Hooks.run(LogFiles.python, [script, proxy.proxyURL, target, scenario] + (ca.map { [$0] } ?? []),
                                      timeout: timeout, environment: environment)
        guard run.exitCode == 0, let line = run.stdout.split(separator: "\n").last,
              let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestSupportError("ws_client.py \(scenario) failed (\(run.exitCode)): \(run.stdout) \(run.stderr)")
        }
        return object
    }

    /// The session's record (the one written at its end), waiting for it.
    static func sessionRecord(_ proxy: ProxyHarness) async -> FlowRecord? {
        let found = await eventually(timeout: .seconds(20)) {
            proxy.recorder.records.contains { $0.webSocket != nil && $0.webSocket?.isOpening == false }
        }
        guard found else { return nil }
        return proxy.recorder.records.first { $0.webSocket != nil && $0.webSocket?.isOpening == false }
    }

    @Test("ws:// as an absolute-form request: 101 with the client's handshake headers, an echo, a close")
    func absoluteForm() async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let out = try await Self.client(proxy, "ws://127.0.0.1:\(server.port)/chat", "absolute")
                let head = out["head"] as? String ?? ""
                #expect(head.hasPrefix("HTTP/1.1 101"), "\(out)")
                #expect(head.lowercased().contains("sec-websocket-accept:"), "\(head)")
                #expect(head.contains("X-Test-Server: ws"), "\(head)")
                #expect(out["echo"] as? String == "absolute hello", "\(out)")
                #expect((out["close_reply"] as? [Int])?.first == 0x88, "a close frame came back: \(out)")
                let handshake = try #require(server.records.handshakes.first)
                #expect(handshake.first(name: "Sec-WebSocket-Protocol") == "chat", "the client's headers reach the server unchanged")
                #expect(handshake.first(name: "Upgrade")?.lowercased() == "websocket")
                let record = try #require(await Self.sessionRecord(proxy))
                #expect(record.response?.status == 101)
                #expect(record.webSocket?.messages.map(\.direction) == [.send, .receive])
                #expect(record.webSocket?.close?.code == 1000)
                #expect(record.webSocket?.close?.by == .client)
            }
        }
    }

    @Test("through a blind CONNECT tunnel: text, binary, fragmented, ping/pong and close all reach the server")
    func blindTunnel() async throws {
        try await TestWebSocketServer.with { server in
            try await withProxy { proxy in
                let out = try await Self.client(proxy, "ws://127.0.0.1:\(server.port)/", "echo")
                #expect(out["error"] == nil, "\(out)")
                #expect(out["text"] as? String == "hello text")
                #expect(out["binary"] as? String == Data([0, 1, 2] + Array("binary".utf8) + [0xFF]).base64EncodedString())
                #expect(out["fragmented"] as? String == "frag-mented")
                #expect(out["close_code"] as? Int == 1000)
                #expect(server.records.messages == 3)
            }
        }
    }

    @Test("wss in an intercepted tunnel: every frame kind, the console lines, the JSONL and HAR session")
    func intercepted() async throws {
        let ca = TestCA.shared
        try await TestWebSocketServer.with(tls: ca.identity([ca.leaf, ca.intermediate])) { server in
            try await withInterceptingProxy({ $0.captureBodies = true }) { proxy, caPath in
                let out = try await Self.client(proxy, "wss://localhost:\(server.port)/live", "echo", ca: caPath)
                #expect(out["error"] == nil, "\(out)")
                #expect(out["text"] as? String == "hello text")
                #expect(out["fragmented"] as? String == "frag-mented")
                #expect(out["close_code"] as? Int == 1000)
                let record = try #require(await Self.sessionRecord(proxy))
                let session = try #require(record.webSocket)
                #expect(record.url == "https://localhost:\(server.port)/live", "the files keep the handshake's URL")
                #expect(Hooks.eventTexts([record]).contains("intercepted"))
                #expect(session.sentMessages == 3 && session.receivedMessages == 3, "\(session)")
                #expect(session.messages.first?.data == Array("hello text".utf8))
                #expect(session.messages.contains { $0.opcode == 2 && $0.direction == .receive })
                let opening = proxy.recorder.records.first { $0.webSocket?.isOpening == true }
                let openLine = ConsoleLog.line(for: try #require(opening))
                #expect(openLine.contains("101 GET wss://localhost:\(server.port)/live"), "\(openLine)")
                #expect(openLine.hasSuffix("websocket"), "\(openLine)")
                let closeLine = ConsoleLog.line(for: record)
                #expect(closeLine.contains("websocket closed 1000 ↑3 msgs"), "\(closeLine)")
                #expect(closeLine.contains("↓3 msgs"), "\(closeLine)")
                let jsonl = JSONLWriter.line(for: record)
                #expect(jsonl.contains(#""websocket":{"protocol":"websocket","messages":[{"direction":"send""#), "\(jsonl)")
                let har = HARWriter.entryJSON(for: record)
                #expect(har.contains(#""_resourceType":"websocket""#), "\(har)")
                #expect(har.contains(#""_webSocketMessages":[{"type":"send","time":"#), "\(har)")
            }
        }
    }

    @Test("the session's HAR entry validates against HAR 1.2 and haralyzer reads it; its JSONL line has one websocket object")
    func logFiles() async throws {
        let directory = try TemporaryDirectory()
        let harPath = directory.path + "/ws.har", jsonlPath = directory.path + "/ws.jsonl"
        let har = try HARWriter(path: harPath, creatorVersion: "test")
        let jsonl = try JSONLWriter(path: jsonlPath)
        try await Self.intercepted(capture: true, configure: { configuration in
            configuration.recorder = MultiRecorder([configuration.recorder!, har, jsonl])
        }) { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/logged", "echo", ca: ca)
            #expect(out["error"] == nil, "\(out)")
            _ = try #require(await Self.sessionRecord(proxy))
        }
        har.close()
        jsonl.close()
        let entries = try await LogFiles.checkHAR(harPath, directory: directory)
        #expect(entries.count == 1, "one entry per session (the opening record is the console's only): \(entries)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: harPath))) as? [String: Any])
        let entry = try #require(((document["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first)
        #expect(entry["_resourceType"] as? String == "websocket")
        let messages = try #require(entry["_webSocketMessages"] as? [[String: Any]])
        #expect(messages.count == 6)
        #expect(messages.first?["type"] as? String == "send" && messages.first?["opcode"] as? Int == 1)
        #expect(messages.first?["data"] as? String == "hello text")
        #expect(messages.contains { $0["opcode"] as? Int == 2 && $0["data"] as? String == Data([0, 1, 2] + Array("binary".utf8) + [0xFF]).base64EncodedString() })
        let lines = try String(contentsOfFile: jsonlPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        let line = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let websocket = try #require(line["websocket"] as? [String: Any])
        #expect((websocket["close"] as? [String: Any])?["code"] as? Int == 1000)
        #expect(websocket["sent"] as? Int == 3 && websocket["received"] as? Int == 3)
    }

    @Test("the viewer shows one flow per session: pending during the handshake and while open, done with its messages")
    func viewer() async throws {
        try await Self.intercepted(capture: true, configure: { $0.viewer = ViewerSettings() }) { server, proxy, ca in
            let store = try #require(proxy.server.viewer?.store)
            let watch = try #require(store.watch(FlowStore.Watcher(changed: {}, closed: {})))
            defer { store.unwatch(watch.token) }
            let run = Task { try await Self.client(proxy, "wss://localhost:\(server.port)/viewed", "idle", ca: ca)["reply"] as? String }
            // the client holds the session open, silent, for 2.5 s: meanwhile the flow is the open session
            let open = await eventually(timeout: .seconds(20)) {
                store.flows().contains { $0.record.response?.status == 101 && !$0.done }
            }
            #expect(open, "\(store.flows().map { ($0.record.response?.status, $0.state) })")
            #expect(try await run.value == "still here")
            let ended = await eventually(timeout: .seconds(20)) { store.flows().contains { $0.done && $0.record.webSocket != nil } }
            #expect(ended)
            let flows = store.flows()
            #expect(flows.count == 1, "one flow for the handshake, the open session and its end: \(flows.map(\.id))")
            #expect(flows.first?.record.webSocket?.messages.map(\.direction) == [.send, .receive])
        }
    }

    @Test("4 MiB messages both ways, text whole and binary in three fragments")
    func bigMessages() async throws {
        try await Self.intercepted { server, proxy, ca in
                let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "big", ca: ca)
                #expect(out["error"] == nil, "\(out)")
                #expect(out["big_equal"] as? Bool == true)
                #expect(out["big_binary_equal"] as? Bool == true)
        }
    }

    @Test("close with 4001 and a reason from the server reaches the client, and the log says who closed")
    func serverClose() async throws {
        try await Self.intercepted { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "server-close", ca: ca)
            #expect(out["code"] as? Int == 4001, "\(out)")
            #expect(out["reason"] as? String == "server says bye")
            let record = try #require(await Self.sessionRecord(proxy))
            #expect(record.webSocket?.close == WebSocketLog.Close(code: 4001, reason: "server says bye", by: .server))
        }
    }

    @Test("close with 4001 and a reason from the client reaches the server, whose answer comes back")
    func clientClose() async throws {
        try await Self.intercepted { server, proxy, ca in
                let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "client-close", ca: ca)
                #expect(out["code"] as? Int == 4001, "\(out)")
                #expect(out["reason"] as? String == "client says bye")
                #expect(server.records.clientCloseCodes == [4001])
        }
    }

    @Test("a server that vanishes without a close frame closes the client's connection")
    func serverVanishes() async throws {
        try await Self.intercepted { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "vanish", ca: ca, timeout: .seconds(60))
            #expect(out["received_close_frame"] as? Bool == false, "\(out)")
            let record = try #require(await Self.sessionRecord(proxy))
            #expect(record.webSocket?.close?.code == nil)
            #expect(record.webSocket?.close?.by == .server)
        }
    }

    @Test("an open session outlives --idle-timeout (it applies to HTTP, not to an open WebSocket)")
    func idleTimeoutDoesNotApply() async throws {
        try await Self.intercepted(configure: { $0.limits.clientIdleTimeoutMs = 1000 }) { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "idle", ca: ca)
            #expect(out["error"] == nil, "\(out)")
            #expect(out["reply"] as? String == "still here")
        }
    }

    @Test("a client that stops reading stalls the server (backpressure through the proxy), and then gets every byte")
    func slowReader() async throws {
        try await Self.intercepted { server, proxy, ca in
            // The client reads nothing until this file exists, so that on a loaded machine the stall is measured
            // before the client resumes, not raced against a fixed pause.
            let resume = FileManager.default.temporaryDirectory.appendingPathComponent("hookproxy-ws-resume-\(UUID())").path
            defer { try? FileManager.default.removeItem(atPath: resume) }
            let run = Task {
                try await Self.client(proxy, "wss://localhost:\(server.port)/", "slow-reader", ca: ca,
                                      environment: ["WS_RESUME_FILE": resume])["received_bytes"] as? Int
            }
            // While the client reads nothing, the server may fill the socket buffers and hookproxy's bounded backlog,
            // not send 25 MiB: measured once the flood has not moved for a second.
            #expect(await eventually(timeout: .seconds(30)) { server.records.floodSent > 0 })
            var last = -1
            var stillSince = ContinuousClock.now
            let stalled = await eventually(timeout: .seconds(30), interval: .milliseconds(100)) {
                let now = server.records.floodSent
                if now != last { stillSince = .now }
                last = now
                return ContinuousClock.now - stillSince >= .seconds(1)
            }
            let stalledAt = server.records.floodSent
            FileManager.default.createFile(atPath: resume, contents: nil)
            #expect(stalled, "the flood never stopped moving while the client read nothing (at \(stalledAt))")
            #expect(stalledAt < 400, "the server sent every message while the client read none: nothing held it back")
            let received = try await run.value
            #expect(received == 400 * 65536)
        }
    }

    @Test("30 concurrent sessions × 50 messages")
    func concurrentSessions() async throws {
        try await Self.intercepted { server, proxy, ca in
                let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "many", ca: ca, timeout: .seconds(150))
                #expect(out["messages"] as? Int == 1500, "\(out)")
                #expect(server.records.messages == 1500)
        }
    }

    /// A long session (here 10,200 messages each way, each edited by a rule that notes it) keeps its memory bounded: the log
    /// lists the first `maxListedMessages`, counts them all, and keeps each distinct note once with its count.
    @Test("a long session lists its first 10,000 messages, counts all of them, and notes each distinct edit note once")
    func longSessionStaysBounded() async throws {
        let rules = """
            - name: ws-json
              match: { host: localhost, websocket: true }
              websocket:
                to_server: { json: { set: { edited: true } } }
            """
        try await Self.intercepted(rules: rules) { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "long", ca: ca,
                                            environment: ["WS_MESSAGES": "10200"], timeout: .seconds(150))
            #expect(out["sent"] as? Int == 10200, "\(out)")
            let record = try #require(await Self.sessionRecord(proxy))
            let session = try #require(record.webSocket)
            #expect(session.messages.count == 10_000)
            #expect(session.sentMessages == 10200 && session.receivedMessages == 10200)
            let notes = record.events.map(\.action)
            #expect(notes.contains("10400 messages after the first 10000 not listed (counted in the totals)"), "\(notes)")
            let json = notes.filter { $0.contains("not JSON") }
            #expect(json.count == 1 && json.first?.hasSuffix("(×10200)") == true, "\(json)")
        }
    }

    @Test("websocket rules: match.websocket narrows to handshakes, to_server edits JSON text, to_client replaces text, binary passes")
    func rules() async throws {
        let rules = """
            - name: ws-only
              match: { host: localhost, websocket: true }
              request: { set_headers: { X-Handshake-Rule: "yes" } }
              websocket:
                to_server: { json: { set: { via: "hookproxy" } } }
                to_client: { replace: [ { text: "hello", with: "HELLO" } ] }
            - name: never-ws
              match: { host: localhost, websocket: false }
              request: { set_headers: { X-Not-WS: "yes" } }
            """
        try await Self.intercepted(rules: rules) { server, proxy, ca in
            let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "json", ca: ca)
            #expect(out["error"] == nil, "\(out)")
            // to_server added the member (the server echoed the edited text), to_client then replaced "hello"
            let reply = out["reply"] as? String ?? ""
            #expect(reply.contains(#""via":"hookproxy""#), "\(reply)")
            #expect(reply.contains("HELLO") && !reply.contains("hello"), "\(reply)")
            #expect(out["binary_reply"] as? String == Data([1] + Array("binary stays".utf8)).base64EncodedString())
            let handshake = try #require(server.records.handshakes.first)
            #expect(handshake.first(name: "X-Handshake-Rule") == "yes")
            #expect(handshake.first(name: "X-Not-WS") == nil)
            let record = try #require(await Self.sessionRecord(proxy))
            #expect(record.rules == ["trust-test-root", "ws-only"], "\(record.rules)")
        }
    }

    @Test("a pin mismatch on the WebSocket upstream: 502 to the client, and no handshake reaches the server")
    func pinMismatch() async throws {
        let directory = try TemporaryDirectory()
        let wrongPin = try directory.writePEM([TestCA.shared.selfSigned], to: "other.pem")
        let ca = TestCA.shared
        try await TestWebSocketServer.with(tls: ca.identity([ca.leaf, ca.intermediate])) { server in
            let store = try Hooks.store(directory, """
                rules:
                  - name: pinned
                    match: { host: localhost }
                    trust: { pinning: certificate, certificates: [\(wrongPin)] }
                """)
            try await withHookProxy(rules: store, { configuration in
                configuration.interceptHosts = ["localhost"].compactMap(HostGlob.init)
                configuration.caDirectory = directory.path + "/ca"
            }) { proxy in
                let caPath = try proxy.server.certificateAuthority().certificatePath
                let out = try await Self.client(proxy, "wss://localhost:\(server.port)/", "echo", ca: caPath)
                #expect((out["error"] as? String ?? "").contains("502"), "\(out)")
                #expect(server.records.handshakes.isEmpty, "no byte of the handshake reached the server")
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.status == 502)
                #expect(Hooks.eventTexts(records).contains { $0.contains("trust rejected") }, "\(Hooks.eventTexts(records))")
            }
        }
    }

    /// The client's close ended the session, which closed the upstream connection at once and dropped what hookproxy
    /// still queued for the server, its close frame last (a hostile tester saw 2 of 8 MiB lost). The server reads
    /// slowly through a small fixed receive buffer, so hookproxy holds a backlog when the client leaves. Over wss the
    /// client leaves without TLS's close_notify, as many do (NIOSSL reports an unclean shutdown).
    @Test("a client that writes 8 MiB and its close frame and closes at once: a slow server gets every message and the close code",
          arguments: ["ws", "wss"])
    func clientClosesAfterWriting(scheme: String) async throws {
        let check: ([String: Any], ProxyHarness) async throws -> Void = { out, proxy in
            #expect(out["error"] == nil, "\(out)")
            #expect(out["messages"] as? Int == 128, "\(out)")
            #expect(out["intact"] as? Bool == true, "\(out)")
            #expect(out["close_code"] as? Int == 4002, "\(out)")
            #expect(out["close_reason"] as? String == "client done", "\(out)")
            let record = try #require(await Self.sessionRecord(proxy))
            #expect(record.webSocket?.sentMessages == 128)
            #expect(record.webSocket?.close == WebSocketLog.Close(code: 4002, reason: "client done", by: .client),
                    "\(String(describing: record.webSocket?.close))")
        }
        guard scheme == "wss" else {
            return try await withProxy { proxy in
                try await check(try await Self.client(proxy, "ws://127.0.0.1:1/", "client-flush", timeout: .seconds(40)), proxy)
            }
        }
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let cert = try directory.writePEM([ca.leaf, ca.intermediate], to: "server.pem")
        try directory.write(ca.leaf.privateKeyPEM, to: "server.key")
        try await Self.intercepted { _, proxy, caPath in
            let out = try await Self.client(proxy, "wss://localhost:1/", "client-flush", ca: caPath, environment: [
                "WS_SERVER_CERT": cert, "WS_SERVER_KEY": directory.path + "/server.key",
            ], timeout: .seconds(40))
            try await check(out, proxy)
        }
    }

    /// Runs a ws_client.py scenario that brings its own TLS server (Python's websockets, which negotiates
    /// permessage-deflate, unless `deflate` is false) with the test CA's leaf, through a proxy intercepting
    /// `localhost` with `rules`.
    static func deflateScenario(_ scenario: String, rules: String = "", deflate: Bool = true,
                                environment: [String: String] = [:],
                                _ body: ([String: Any], ProxyHarness) async throws -> Void) async throws {
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let cert = try directory.writePEM([ca.leaf, ca.intermediate], to: "server.pem")
        try directory.write(ca.leaf.privateKeyPEM, to: "server.key")
        try await Self.intercepted(rules: rules, capture: true) { _, proxy, caPath in
            let out = try await Self.client(proxy, "wss://localhost:1/", scenario, ca: caPath, environment: [
                "WS_SERVER_CERT": cert, "WS_SERVER_KEY": directory.path + "/server.key",
            ].merging(environment) { $1 })
            #expect(out["error"] == nil, "\(out)")
            #expect((out["extensions"] as? String ?? "").contains("permessage-deflate") == deflate, "\(out)")
            try await body(out, proxy)
        }
    }

    @Test("permessage-deflate stays on end to end (Python's websockets both sides), and the log shows the messages inflated")
    func deflate() async throws {
        try await Self.deflateScenario("deflate") { out, proxy in
            #expect(out["replies"] as? [Bool] == [true, true], "\(out)")
            let record = try #require(await Self.sessionRecord(proxy))
            let texts = record.webSocket?.messages.map { String(decoding: $0.data, as: UTF8.self) } ?? []
            #expect(texts == ["compressed hello " * 20, "compressed hello " * 20, "and again " * 30, "and again " * 30],
                    "\(texts.map { $0.prefix(40) })")
        }
    }

    @Test("websocket rules edit messages compressed with permessage-deflate, which stays on both ways")
    func deflateEdited() async throws {
        let rules = """
            - name: ws-edit
              match: { host: localhost, websocket: true }
              websocket:
                to_server: { replace: [{ text: "hello", with: "HELLO" }] }
                to_client: { replace: [{ text: "again", with: "AGAIN" }] }
            """
        try await Self.deflateScenario("deflate-edit", rules: rules) { out, proxy in
            #expect(out["server_received"] as? [String] == ["compressed HELLO " * 20, "and again " * 30, "binary:16384",
                                                            "HELLO once more " * 10], "\(out)")
            #expect(out["replies"] as? [String] == ["compressed HELLO " * 20, "and AGAIN " * 30, "binary intact",
                                                    "HELLO once more " * 10], "\(out)")
            let record = try #require(await Self.sessionRecord(proxy))
            let texts = record.webSocket?.messages.filter { $0.opcode == 1 }.map { String(decoding: $0.data, as: UTF8.self) } ?? []
            #expect(texts.first == "compressed HELLO " * 20, "the log shows the message as it went on: \(texts.map { $0.prefix(40) })")
        }
    }

    /// One write from a peer holding a compressed frame that is not deflate data, then a plain text frame, on a
    /// session a `websocket` rule edits in that direction (so hookproxy inflates it). This crashed the proxy (an
    /// exclusivity conflict between the message flow and the session's end), and the frame after it was relayed.
    @Test("a message the rules cannot inflate fails the session (a close frame 1009 to both ends), and nothing sent after it is relayed",
          arguments: [(scenario: "deflate-corrupt", direction: "to_client", peerGot: "received"),
                      (scenario: "deflate-corrupt-client", direction: "to_server", peerGot: "server_received")])
    func corruptCompressedMessageEndsTheSession(scenario: String, direction: String, peerGot: String) async throws {
        let rules = """
            - name: ws-edit
              match: { host: localhost, websocket: true }
              websocket:
                \(direction): { replace: [{ text: "after", with: "AFTER" }] }
            """
        try await Self.deflateScenario(scenario, rules: rules) { out, proxy in
            #expect(out[peerGot] as? [String] == [], "the other peer got nothing: \(out)")
            #expect(out["closed"] as? Bool == true, "\(out)")
            // The client's library read hookproxy's close frame, and so did the server's (the to_server case keeps
            // the server running until the end).
            let close = out["close"] as? [Any]
            #expect(close?.first as? Int == 1009 && (close?.last as? String)?.hasPrefix("hookproxy: cannot inflate") == true,
                    "\(out)")
            if direction == "to_server" {
                let serverClose = out["server_close"] as? [Any]
                #expect(serverClose?.first as? Int == 1009, "\(out)")
            }
            let record = try #require(await Self.sessionRecord(proxy))
            #expect(record.webSocket?.close?.code == 1009, "\(String(describing: record.webSocket?.close))")
            #expect(record.webSocket?.close?.reason.contains("cannot inflate") == true)
            let logged = direction == "to_client" ? record.webSocket?.receivedMessages : record.webSocket?.sentMessages
            #expect(logged == 1, "the bad message is logged, the one after the end is not")
        }
    }

    /// A TLS WebSocket server and a proxy that intercepts `localhost`, trusting the test CA upstream (plus `rules`).
    static func intercepted(rules: String = "", capture: Bool = false,
                            configure: (inout ProxyConfiguration) -> Void = { _ in },
                            _ body: (TestWebSocketServer, ProxyHarness, String) async throws -> Void) async throws {
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([ca.root], to: "R.pem")
        let store = try Hooks.store(directory, """
            rules:
              - name: trust-test-root
                match: { host: localhost }
                trust: { ca_file: \(root) }
            \(rules.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
            """)
        try await TestWebSocketServer.with(tls: ca.identity([ca.leaf, ca.intermediate])) { server in
            try await withHookProxy(rules: store, { configuration in
                configuration.interceptHosts = ["localhost"].compactMap(HostGlob.init)
                configuration.caDirectory = directory.path + "/ca"
                configuration.captureBodies = capture
                configure(&configuration)
            }) { proxy in
                try await body(server, proxy, try proxy.server.certificateAuthority().certificatePath)
            }
        }
    }
}

private func * (text: String, count: Int) -> String { String(repeating: text, count: count) }

/// Upgrades that are not WebSocket, and handshakes the server refuses.
@Suite("Other upgrades (issue 15)", .timeLimit(.minutes(2)))
struct OtherUpgradeTests {
    @Test("another Upgrade accepted with 101 is relayed as raw bytes both ways, and logged as such")
    func rawRelay() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-raw\r\nConnection: Upgrade\r\n\r\nserver-hello"), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send("GET http://127.0.0.1:\(origin.port)/raw HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\nUpgrade: x-raw\r\nConnection: Upgrade\r\n\r\n")
                let response = try await client.readResponse()
                #expect(response.status == 101)
                #expect(response.header("Upgrade") == "x-raw")
                #expect(try await client.read(atLeast: 12) == Array("server-hello".utf8))
                try await client.send("client-bytes\u{0}\u{1}")
                let arrived = await eventually(timeout: .seconds(10)) {
                    String(decoding: origin.received, as: UTF8.self).contains("client-bytes\u{0}\u{1}")
                }
                #expect(arrived, "the client's bytes reach the server after the 101")
                let head = String(decoding: origin.received, as: UTF8.self)
                #expect(head.contains("Upgrade: x-raw") && head.contains("Connection: Upgrade"), "\(head)")
                client.close()
                let record = await eventually(timeout: .seconds(10)) {
                    proxy.recorder.records.contains { $0.webSocket?.isOpening == false }
                }
                #expect(record)
                let session = proxy.recorder.records.first { $0.webSocket?.isOpening == false }?.webSocket
                #expect(session?.protocolName == "x-raw")
                #expect(session?.sentBytes == 14 && session?.receivedBytes == 12, "\(String(describing: session))")
            }
        }
    }

    /// The client's close ended the relay, which closed the upstream connection at once and dropped what hookproxy
    /// still queued for the server (a hostile tester saw 2 of 8 MiB lost). The server reads slowly, so hookproxy
    /// holds a backlog when the client leaves.
    @Test("a client that writes 16 MiB and closes at once: a server that starts reading later still gets every byte")
    func clientClosesAfterWriting() async throws {
        let server = try NonReadingServer(answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-raw\r\nConnection: Upgrade\r\n\r\n",
                                          readingAfter: .milliseconds(1500))
        defer { server.stop() }
        try await withProxy { proxy in
            let client = try await RawClient.connect(port: proxy.port)
            try await client.send("GET http://127.0.0.1:\(server.port)/raw HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nUpgrade: x-raw\r\nConnection: Upgrade\r\n\r\n")
            #expect(try await client.readResponse().status == 101)
            let size = 16 * 1024 * 1024
            try await client.send([UInt8](repeating: 0x63, count: size))
            client.close()
            #expect(await eventually(timeout: .seconds(20)) { server.readToEnd }, "the proxy closed the server's connection")
            #expect(server.receivedAfterHead == size)
            let session = await eventually(timeout: .seconds(10)) {
                proxy.recorder.records.contains { $0.webSocket?.isOpening == false }
            }
            #expect(session)
            let log = proxy.recorder.records.first { $0.webSocket?.isOpening == false }?.webSocket
            #expect(log?.sentBytes == size && log?.close?.by == .client, "\(String(describing: log))")
        }
    }

    @Test("a handshake the server refuses (403) reaches the client as the server sent it, and the connection closes")
    func refused() async throws {
        try await withOrigin { origin in
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                try await client.send("GET http://127.0.0.1:\(origin.port)/status/403 HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
                let response = try await client.readResponse()
                #expect(response.status == 403)
                #expect(response.bodyText == "status 403\n", "\(response.bodyText)")
                #expect(await client.waitForClose())
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.status == 403)
                #expect(records.first?.webSocket == nil)
            }
        }
    }
}
