import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `--upstream-proxy` failures that are the proxy's own (it refuses connections, hangs, refuses the credentials, asks
/// for them forever) name the proxy, not the server the client asked for, in the answer and the log; and its 407
/// rounds to a CONNECT are counted like a plain request's. Three ways through it: a plain request (curl forwards it
/// in absolute form), a client's CONNECT (a blind tunnel, `TunnelConnector`), and an https upstream (curl's own
/// CONNECT inside the transfer, here reached through `map_remote`).
@Suite("--upstream-proxy: its own failures", .timeLimit(.minutes(2)))
struct UpstreamProxyFailureTests {
    enum Path: String, CaseIterable {
        case plain, clientConnect, httpsUpstream
    }

    /// Sends one request by `path` through hookproxy (configured with `upstreamProxy`): status, body and the record's error.
    static func send(_ path: Path, upstreamProxy: String, connectTimeoutMs: Int = 10_000) async throws
        -> (status: Int, body: String, logged: String?) {
        let directory = try TemporaryDirectory()
        let rules = try Hooks.store(directory, """
            rules:
              - name: tls
                match: { host: t.test }
                map_remote: { to: "https://example.invalid" }

            """)
        return try await withHookProxy(rules: rules, {
            $0.upstream.upstreamProxy = upstreamProxy
            $0.upstream.connectTimeoutMs = connectTimeoutMs
        }) { proxy in
            switch path {
            case .plain, .httpsUpstream:
                let response = try await Hooks.curl(proxy, path == .plain ? "http://example.invalid/x" : "http://t.test/x")
                let records = await Hooks.records(proxy)
                return (response.status, response.bodyText, records.last?.error)
            case .clientConnect:
                let response = try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    try await client.send(rawRequest("CONNECT example.invalid:443 HTTP/1.1", ["Host: example.invalid:443"]))
                    return try await client.readResponse(method: "CONNECT")
                }
                let records = await Hooks.records(proxy)
                return (response.status, String(decoding: response.body, as: UTF8.self), records.last?.error)
            }
        }
    }

    @Test("an upstream proxy that refuses connections: the 502 names it", arguments: Path.allCases)
    func refused(path: Path) async throws {
        let refusing = try Hooks.closedPort()
        let port = refusing.port
        let (status, body, logged) = try await Self.send(path, upstreamProxy: "http://127.0.0.1:\(port)")
        withExtendedLifetime(refusing) {}
        #expect(status == 502, "\(body)")
        #expect(body.contains("cannot connect to upstream proxy 127.0.0.1:\(port) (for example.invalid"), "\(body)")
        #expect(logged?.contains("upstream proxy 127.0.0.1:\(port)") == true, "the log record: \(logged ?? "-")")
    }

    @Test("an upstream proxy that never answers the CONNECT: the 504 names it", arguments: [Path.clientConnect, .httpsUpstream])
    func silent(path: Path) async throws {
        try await MisbehavingOrigin.with([.hang]) { upstream in
            let (status, body, logged) = try await Self.send(path, upstreamProxy: "http://127.0.0.1:\(upstream.port)",
                                                             connectTimeoutMs: 1_000)
            #expect(status == 504, "\(body)")
            #expect(body.contains("connect timeout upstream proxy 127.0.0.1:\(upstream.port) (for example.invalid"), "\(body)")
            #expect(logged?.contains("upstream proxy 127.0.0.1:\(upstream.port)") == true, "the log record: \(logged ?? "-")")
        }
    }

    @Test("an upstream proxy that refuses the credentials for a CONNECT: the 502 names it and its 407",
          arguments: [Path.clientConnect, .httpsUpstream])
    func wrongCredentials(path: Path) async throws {
        let credentials = TestOrigin.Credentials(user: "up", password: "right")
        try await withOrigin(proxyAuth: credentials) { upstream in
            let (status, body, logged) = try await Self.send(path, upstreamProxy: "http://up:wrong@127.0.0.1:\(upstream.port)")
            #expect(status == 502, "\(body)")
            #expect(body.contains("upstream proxy 127.0.0.1:\(upstream.port) refused CONNECT example.invalid:443: it answered 407"), "\(body)")
            #expect(body.contains("credentials in --upstream-proxy"), "\(body)")
            #expect(!body.contains("wrong"), "the password is never shown: \(body)")
            #expect(logged?.contains("refused CONNECT example.invalid:443") == true, "the log record: \(logged ?? "-")")
            #expect(logged?.contains("wrong") == false)
            #expect(upstream.requests.allSatisfy { $0.method == "CONNECT" })
        }
    }

    @Test("an upstream proxy that calls every Digest nonce stale: a CONNECT gets a few rounds, not thousands",
          arguments: Path.allCases)
    func staleDigestForever(path: Path) async throws {
        let stale = "HTTP/1.1 407 Proxy Authentication Required\r\n"
            + "Proxy-Authenticate: Digest realm=\"p\", nonce=\"n0\", qop=\"auth\", stale=true\r\nContent-Length: 0\r\n\r\n"
        try await MisbehavingOrigin.with([.text(stale)]) { upstream in
            let (status, body, logged) = try await Self.send(path, upstreamProxy: "http://u:p@127.0.0.1:\(upstream.port)")
            let received = String(decoding: upstream.received, as: UTF8.self)
            let requests = received.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }.count
            // The first request and 4 answers (CurlTransfer.maxAuthRounds); libcurl alone sends thousands.
            #expect(requests <= 5, "\(requests) requests")
            #expect(status == 502, "\(body.prefix(300))")
            #expect(body.contains("challenge failed upstream proxy 127.0.0.1:\(upstream.port) (for example.invalid"), "\(body.prefix(300))")
            #expect(body.contains("asked for credentials again after 4 answers (407 Digest"), "\(body.prefix(300))")
            #expect(logged?.contains("asked for credentials again") == true, "the log record: \(logged ?? "-")")
        }
    }

    @Test("a challenge answered on a new tunnel: the proxy's second CONNECT answer is not taken for the server's response")
    func challengeAnsweredOnNewTunnel() async throws {
        let ca = TestCA.shared
        let credentials = TestOrigin.Credentials(user: "up", password: "up-Pw-77")
        try await withOrigin(proxyAuth: credentials) { upstream in
            try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { target in
                let directory = try TemporaryDirectory()
                let root = try directory.writePEM([ca.root], to: "root.pem")
                let rules = try Hooks.store(directory, """
                    rules:
                      - name: answered
                        match: { host: t.test }
                        map_remote: { to: "https://localhost:\(target.port)" }
                        trust: { ca_file: "\(root)" }
                        on_challenge: { action: use_credential, username: a, password: b }

                    """)
                try await withHookProxy(rules: rules, { $0.upstream.upstreamProxy = "http://up:up-Pw-77@127.0.0.1:\(upstream.port)" }) { proxy in
                    // The 401 closes its connection: curl answers on a new tunnel (a second CONNECT, after the first
                    // round's request was sent).
                    let response = try await Hooks.curl(proxy, "http://t.test/auth/basic?user=a&pass=b&close=1",
                                                        ["--data-binary", "answered body"])
                    #expect(response.status == 200, "\(response.headers) \(response.bodyText) \(response.stderr)")
                    #expect(response.bodyText == "answered body")
                    #expect(response.header("Content-Type") == "application/octet-stream", "the server's head: \(response.headers)")
                    #expect(response.header("Content-Length") == "13", "\(response.headers)")
                    #expect(target.requests.count == 2)
                    #expect(upstream.requests.filter { $0.method == "CONNECT" && $0.header("Proxy-Authorization") != nil }.count >= 2,
                            "\(upstream.requests.map(\.method))")
                }
            }
        }
    }
}
