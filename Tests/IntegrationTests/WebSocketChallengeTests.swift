import Foundation
import ProxyLog
import ProxyModel
import ProxyTestSupport
import Testing

/// Issue 15, "on_challenge applies to WebSocket upstreams": a server that answers the handshake with 401. curl only
/// connects for an upgrade, so hookproxy answers the challenge itself (Basic or Digest), once, on a new connection;
/// `cancel` answers 502; `pass` and a refused credential hand the 401 to the client. A raw client speaks through
/// the real `hookproxy run` binary's rules.
@Suite("WebSocket handshake challenges (issue 15)", .timeLimit(.minutes(2)))
struct WebSocketChallengeTests {
    static let credential = TestWebSocketServer.Credential(user: "alice", password: "s3cret-pw")

    /// Opens a WebSocket to `server` through a proxy with one rule `on_challenge: ON_CHALLENGE` for 127.0.0.1;
    /// returns the handshake's answer, the frames' echo of "hi" when it switched, and the proxy's record.
    static func handshake(_ server: TestWebSocketServer, onChallenge: String) async throws
        -> (status: Int, echo: [[UInt8]], record: FlowRecord?)
    {
        let directory = try TemporaryDirectory()
        let store = try Hooks.store(directory, """
            rules:
              - name: ws-login
                match: { host: 127.0.0.1 }
                on_challenge: \(onChallenge)

            """)
        return try await withHookProxy(rules: store) { proxy in
            let client = try await RawClient.connect(port: proxy.port)
            defer { client.close() }
            let url = "http://127.0.0.1:\(server.port)/chat"
            try await client.send(WebSocketWire.handshake(url, host: "127.0.0.1:\(server.port)"))
            let response = try await client.readResponse()
            var echo: [[UInt8]] = []
            if response.status == 101 {
                try await client.send(WebSocketWire.text("hi"))
                echo = WebSocketWire.payloads(try await client.read(atLeast: 4))
                try await client.send(WebSocketWire.frame(opcode: 8, [0x03, 0xE8]))
            } else {
                _ = await client.waitForClose()
            }
            client.close()
            let records = await Hooks.records(proxy)
            return (response.status, echo, records.first)
        }
    }

    @Test("use_credential answers a Basic or a Digest challenge to the handshake; the session then works",
          arguments: [false, true])
    func answered(digest: Bool) async throws {
        var credential = Self.credential
        credential.digest = digest
        try await TestWebSocketServer.with(requiring: credential) { server in
            let (status, echo, record) = try await Self.handshake(server, onChallenge:
                "{ action: use_credential, username: alice, password: s3cret-pw }")
            #expect(status == 101)
            #expect(echo == [Array("hi".utf8)])
            let handshakes = server.records.handshakes
            #expect(handshakes.count == 2, "one refused round, one answered")
            let sent = handshakes.last?.first(name: "authorization") ?? ""
            #expect(sent.hasPrefix(digest ? "Digest " : "Basic "), "\(sent)")
            let scheme = digest ? "digest" : "basic"
            #expect(record?.events.contains { $0.hook == .challenge && $0.action == "challenge answered \(scheme)" } == true,
                    "\(String(describing: record?.events))")
            #expect(record?.response?.status == 101)
        }
    }

    @Test("a refused credential and `pass` hand the 401 to the client; `cancel` answers 502 naming the challenge")
    func refusedPassAndCancel() async throws {
        try await TestWebSocketServer.with(requiring: Self.credential) { server in
            let wrong = try await Self.handshake(server, onChallenge:
                "{ action: use_credential, schemes: [basic], username: alice, password: wrong }")
            #expect(wrong.status == 401)
            #expect(server.records.handshakes.count == 2, "answered once, not again")
            #expect(wrong.record?.events.contains { $0.action == "challenge failed" } == true,
                    "\(String(describing: wrong.record?.events))")

            let passed = try await Self.handshake(server, onChallenge: "{ action: pass }")
            #expect(passed.status == 401)
            #expect(server.records.handshakes.count == 3)

            let cancelled = try await Self.handshake(server, onChallenge: "{ action: cancel }")
            #expect(cancelled.status == 502)
            #expect(cancelled.record?.error?.contains("challenge cancelled 127.0.0.1:\(server.port)") == true,
                    "\(String(describing: cancelled.record?.error))")
            #expect(cancelled.record?.events.contains { $0.action == "challenge cancelled" } == true)
        }
    }

    @Test("a wss server that asks for a client certificate gets the rule's (on_challenge.client_certificate)")
    func clientCertificate() async throws {
        let ca = TestCA.shared
        try await TestWebSocketServer.with(tls: ca.identity([ca.leaf, ca.intermediate]), clientCA: ca.clientCA) { server in
            let directory = try TemporaryDirectory()
            let store = try Hooks.clientCertificateRules(in: directory, port: server.port)
            try await withHookProxy(rules: store) { proxy in
                for (host, expected) in [("c.test", 101), ("n.test", 502)] {
                    let client = try await RawClient.connect(port: proxy.port)
                    defer { client.close() }
                    try await client.send(WebSocketWire.handshake("http://\(host)/chat", host: host))
                    let response = try await client.readResponse()
                    #expect(response.status == expected, "\(host): \(response.rawHead)\(response.bodyText)")
                }
                #expect(server.records.handshakes.count == 1, "only the handshake with a client certificate got through")
            }
        }
    }

    @Test("the credential never reaches the logs, even with --log-secrets")
    func credentialNotLogged() async throws {
        try await TestWebSocketServer.with(requiring: Self.credential) { server in
            let (status, _, flow) = try await Self.handshake(server, onChallenge:
                "{ action: use_credential, schemes: [basic], username: alice, password: s3cret-pw }")
            #expect(status == 101)
            let record = try #require(flow)
            // Even with --log-secrets: credentials hookproxy adds itself are never logged.
            let logged = JSONLWriter.line(for: Redactor(logSecrets: true).redact(record))
            #expect(!logged.contains("s3cret-pw") && !logged.contains(Data("alice:s3cret-pw".utf8).base64EncodedString()),
                    "\(logged)")
        }
    }
}
