import Foundation
import ProxyLog
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 18, item 1: `--reverse LISTEN=URL`. Real sockets on 127.0.0.1: a TestOrigin (plain or TLS, L + I from the
/// test CA), hookproxy in-process with its reverse listeners on port 0, and the real curl binary talking to a
/// listener as if it were the server.
@Suite("Reverse proxy (issue 18: 1)", .timeLimit(.minutes(3)))
struct ReverseProxyTests {
    static let testCA = TestCA.shared
    var R: TestCertificate { Self.testCA.root }
    var I: TestCertificate { Self.testCA.intermediate }
    var L: TestCertificate { Self.testCA.leaf }
    var S: TestCertificate { Self.testCA.selfSigned }

    static func trustRule(_ rootPath: String) -> String {
        """
        rules:
          - name: trust-test-root
            match: { host: localhost }
            trust: { ca_file: "\(rootPath)" }

        """
    }

    // MARK: plain listener, plain origin

    @Test("plain listener: the path prefix joins, Host names the origin, rules edit both ways, the log says reverse")
    func plainListenerPlainOrigin() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let rules = """
                rules:
                  - name: tag-reverse
                    match: { host: "127.0.0.1", port: \(origin.port), path: "/echo/base/*" }
                    request: { set_headers: { X-Added: "by-rule" } }
                    response: { set_headers: { X-Rule: edited } }

                """
            try await withReverseProxy(["127.0.0.1:0=http://127.0.0.1:\(origin.port)/echo/base"], rules: rules,
                                       in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                #expect(listener.url == "http://127.0.0.1:\(listener.port)" && listener.port != proxy.port)
                #expect(listener.startLine == "hookproxy reverse \(listener.url) → http://127.0.0.1:\(origin.port)/echo/base")
                let response = try await Reverse.curl("\(listener.url)/x/y?q=1", ["-d", "hello"])
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.status == 200, "\(response.bodyText)")
                #expect(response.bodyText == "hello")
                #expect(response.header("X-Target") == "/echo/base/x/y?q=1", "path prefix + request path")
                #expect(response.header("X-Rule") == "edited")
                let request = try #require(origin.requests.first)
                #expect(request.header("Host") == "127.0.0.1:\(origin.port)", "Host rewritten to the URL's authority")
                #expect(request.headerValues("Host").count == 1)
                #expect(request.header("X-Added") == "by-rule")

                let records = await Hooks.records(proxy)
                let record = try #require(records.first)
                #expect(record.url == "http://127.0.0.1:\(origin.port)/echo/base/x/y?q=1")
                #expect(record.rules == ["tag-reverse"])
                #expect(record.events.first == HookEvent(hook: .reverse, action: "reverse"))
                let line = ConsoleLog.line(for: record)
                #expect(line.contains(" POST http://127.0.0.1:\(origin.port)/echo/base/x/y?q=1 "), "\(line)")
                #expect(line.hasSuffix("[tag-reverse] reverse"), "\(line)")
            }
        }
    }

    @Test("dot segments cannot climb out of the route's path prefix (`/../x` and `%2e%2e` both stay under it)")
    func dotSegmentsStayUnderThePrefix() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            try await withReverseProxy(["127.0.0.1:0=http://127.0.0.1:\(origin.port)/echo/base"], in: directory) { _, listeners in
                let listener = try #require(listeners.first)
                for (target, expected) in [("/../secret", "/echo/base/secret"), ("/a/%2e%2e/%2E%2e/x?y=../z", "/echo/base/x?y=../z")] {
                    let response = try await Reverse.curl("\(listener.url)\(target)", ["--path-as-is"])
                    #expect(response.status == 200, "\(target): \(response.stderr)")
                    #expect(response.header("X-Target") == expected, "\(target)")
                }
                #expect(origin.requests.map(\.target) == ["/echo/base/secret", "/echo/base/x?y=../z"])
                // What some origins resolve and RFC 3986 does not (nginx decodes %2F first, Tomcat drops ;params):
                // refused, and nothing reaches the origin.
                for target in ["/..%2fsecret", "/%2e%2e%5Csecret", "/..;/secret"] {
                    let refused = try await Reverse.curl("\(listener.url)\(target)", ["--path-as-is"])
                    #expect(refused.status == 400, "\(target): \(refused.stderr)")
                    #expect(refused.bodyText.contains("may be a dot segment to the server"), "\(target): \(refused.bodyText)")
                }
                #expect(origin.requests.count == 2)
            }
        }
    }

    /// An HTTP/2 `:path` may carry bytes HTTP/1.1's parser refuses. A `/` followed by a combining mark is one Swift
    /// Character: the dot segments were found by characters, the `..` before it stayed, and the origin, which reads
    /// bytes, climbed out of the prefix to `/secret` (a review's find).
    @Test("HTTP/2 to a TLS listener: a combining mark after a slash does not hide a dot segment")
    func combiningMarkAfterASlash() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            try await withReverseProxy(["https://127.0.0.1:0=http://127.0.0.1:\(origin.port)/echo/base"], in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                let client = try await H2TunnelClient.connect(
                    proxyPort: listener.port, port: listener.port,
                    trustRoots: [try proxy.server.certificateAuthority().certificate], tunnel: false)
                defer { Task { await client.close() } }
                for path in ["/../\u{338}\u{600}/../secret", "/../\u{200D}\u{600}/../secret"] {
                    let response = try await client.openRaw([(":method", "GET"), (":scheme", "https"),
                                                             (":authority", "localhost"), (":path", path)]).response()
                    #expect(response.status == 200, "\(response)")
                    #expect(response.header("x-target") == "/echo/base/secret", "\(response.headers)")
                }
                #expect(origin.requests.map(\.target) == ["/echo/base/secret", "/echo/base/secret"])
            }
        }
    }

    @Test("a respond rule answers on the reverse listener; the origin gets nothing")
    func respondRule() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let rules = """
                rules:
                  - name: mock-user
                    match: { host: "127.0.0.1", path: "/api/users/*", method: GET }
                    respond: { status: 200, headers: { Content-Type: application/json }, body: '{"id": 42}' }

                """
            try await withReverseProxy(["127.0.0.1:0=http://127.0.0.1:\(origin.port)/api"], rules: rules,
                                       in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                let response = try await Reverse.curl("\(listener.url)/users/42")
                #expect(response.status == 200, "\(response.stderr)")
                #expect(response.bodyText == #"{"id": 42}"#)
                #expect(origin.requests.isEmpty)
                let records = await Hooks.records(proxy)
                #expect(records.first?.rules == ["mock-user"])
                #expect(Hooks.eventTexts(records).first == "reverse", "\(Hooks.eventTexts(records))")
            }
        }
    }

    // MARK: TLS

    @Test("plain listener, TLS origin: a trust rule decides as for proxied requests")
    func plainListenerTLSOrigin() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        try await withOrigin(tls: Self.testCA.identity([L, I])) { origin in
            try await withReverseProxy(["http://127.0.0.1:0=https://localhost:\(origin.port)"],
                                       rules: Self.trustRule(root), in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                #expect(!listener.route.tls && listener.url.hasPrefix("http://"))
                let response = try await Reverse.curl("\(listener.url)/head-test")
                #expect(response.status == 200, "\(response.stderr)")
                #expect(response.bodyText == "head-test body\n")
                #expect(origin.requests.first?.header("Host") == "localhost:\(origin.port)")
                let texts = Hooks.eventTexts(await Hooks.records(proxy))
                #expect(Hooks.inOrder(texts, ["reverse", "trust accepted"]), "\(texts)")
            }
        }
    }

    @Test("a trust rule with a wrong pin: 502 naming the rejection, and the origin gets no request bytes")
    func trustRejected() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        let rules = """
            rules:
              - name: pinned
                match: { host: localhost }
                trust: { pinning: public_key, pins: \(yamlList([S.spkiPin])), ca_file: "\(root)" }

            """
        try await withOrigin(tls: Self.testCA.identity([L, I])) { origin in
            try await withReverseProxy(["http://127.0.0.1:0=https://localhost:\(origin.port)"], rules: rules,
                                       in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                let response = try await Reverse.curl("\(listener.url)/head-test")
                #expect(response.status == 502)
                #expect(response.bodyText.hasPrefix("hookproxy: trust rejected localhost"), "\(response.bodyText)")
                #expect(!origin.receivedAnyRequestBytes)
                let texts = Hooks.eventTexts(await Hooks.records(proxy))
                #expect(Hooks.inOrder(texts, ["reverse", "trust rejected"]), "\(texts)")
            }
        }
    }

    @Test("TLS listener (https URL): curl trusting hookproxy's CA sees a leaf it minted for the URL's host")
    func tlsListenerMintedLeaf() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        try await withOrigin(tls: Self.testCA.identity([L, I])) { origin in
            try await withReverseProxy(["127.0.0.1:0=https://localhost:\(origin.port)"], rules: Self.trustRule(root),
                                       in: directory) { proxy, listeners in
                let listener = try #require(listeners.first)
                #expect(listener.route.tls && listener.url.hasPrefix("https://"))
                let ca = try proxy.server.certificateAuthority()
                let response = try await Reverse.curl("https://localhost:\(listener.port)/head-test",
                                                      ["-v"] + Reverse.tlsFlags(port: listener.port, ca: ca.certificatePath))
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.status == 200)
                #expect(response.bodyText == "head-test body\n")
                #expect(response.stderr.contains("subject: CN=localhost"), "\(response.stderr)")
                #expect(response.stderr.contains("hookproxy CA"), "issued by hookproxy's CA: \(response.stderr)")
                #expect(response.stderr.contains("ALPN: server accepted h2"), "HTTP/2 offered: \(response.stderr)")
                #expect(origin.requests.first?.header("Host") == "localhost:\(origin.port)")
                let records = await Hooks.records(proxy)
                #expect(records.first?.url == "https://localhost:\(origin.port)/head-test")
                #expect(ConsoleLog.line(for: try #require(records.first)).contains(" reverse"))
                // a client that does not trust the CA is refused in the handshake, and the listener keeps serving
                let untrusted = try await Reverse.curl("https://localhost:\(listener.port)/head-test",
                                                       ["--resolve", "localhost:\(listener.port):127.0.0.1"])
                #expect(untrusted.exitCode == 60, "\(untrusted.stderr)")
                let again = try await Reverse.curl("https://localhost:\(listener.port)/head-test",
                                                   Reverse.tlsFlags(port: listener.port, ca: ca.certificatePath))
                #expect(again.status == 200, "\(again.stderr)")
            }
        }
    }

    @Test("TLS listener with --reverse-cert (https:// marker, plain origin): the user's chain is presented")
    func tlsListenerUserCertificate() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        let file = try directory.write(L.pem + I.pem + L.privateKeyPEM, to: "reverse.pem", permissions: 0o600)
        try await withOrigin { origin in
            try await withReverseProxy(["https://127.0.0.1:0=http://127.0.0.1:\(origin.port)"], in: directory,
                                       { $0.reverseCertificatePath = file }) { proxy, listeners in
                let listener = try #require(listeners.first)
                #expect(listener.route.tls)
                let response = try await Reverse.curl("https://localhost:\(listener.port)/echo/a",
                                                      ["-v"] + Reverse.tlsFlags(port: listener.port, ca: root))
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.status == 200)
                #expect(response.header("X-Target") == "/echo/a")
                #expect(response.stderr.contains("hookproxy test intermediate I"), "the user's chain: \(response.stderr)")
                #expect(response.stderr.contains("ALPN: server accepted h2"), "HTTP/2 offered: \(response.stderr)")
                #expect(origin.requests.first?.header("Host") == "127.0.0.1:\(origin.port)")
                #expect(!FileManager.default.fileExists(atPath: directory.path + "/ca"), "no CA is needed")
            }
        }
    }

    // MARK: errors

    @Test("bad input on a reverse listener: CONNECT and a bad request get 400, plaintext on TLS is closed; it keeps serving")
    func badInput() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            try await withReverseProxy(["127.0.0.1:0=http://127.0.0.1:\(origin.port)",
                                        "https://127.0.0.1:0=http://127.0.0.1:\(origin.port)"], in: directory) { proxy, listeners in
                let (plain, tls) = (listeners[0], listeners[1])
                let connect = try await RawClient.connect(port: plain.port)
                try await connect.send(rawRequest("CONNECT example.com:443 HTTP/1.1", ["Host: example.com:443"]))
                let refused = try await connect.readResponse(method: "CONNECT")
                #expect(refused.status == 400)
                #expect(refused.bodyText.contains("CONNECT is not served on a reverse listener"), "\(refused.bodyText)")
                connect.close()

                let garbage = try await RawClient.connect(port: plain.port)
                try await garbage.send("GET * HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try await garbage.readResponse().status == 400)
                garbage.close()

                let plaintext = try await RawClient.connect(port: tls.port)
                try await plaintext.send(rawRequest("GET /echo/x HTTP/1.1", ["Host: x"]))
                #expect(await plaintext.waitForClose(), "plain HTTP to a TLS listener is closed")
                plaintext.close()

                #expect(origin.requests.isEmpty)
                let after = try await Reverse.curl("\(plain.url)/echo/after")
                #expect(after.status == 200, "\(after.stderr)")
                let records = await Hooks.records(proxy, count: 3)
                #expect(records.filter { $0.events.first?.hook == .reverse }.count == 3, "\(records.map(\.events))")
            }
        }
    }

    @Test("a route pointing at its own listener gets 508, not a loop")
    func loopToItself() async throws {
        let directory = try TemporaryDirectory()
        let port = try Reverse.freePort()
        try await withReverseProxy(["127.0.0.1:\(port)=http://127.0.0.1:\(port)/again"], in: directory) { _, listeners in
            let response = try await Reverse.curl("\(try #require(listeners.first).url)/x")
            #expect(response.status == 508, "\(response.bodyText)")
            #expect(response.bodyText.contains("loop detected"))
        }
    }

    /// The request carried hookproxy's loop mark from its forward hop to its own reverse listener, which took the
    /// mark for a loop (a review's find): a route is a loop only when it leads back to a listener again.
    @Test("a proxied request to hookproxy's own reverse listener goes on to the route's server: no false 508")
    func proxiedToOwnReverseListener() async throws {
        let directory = try TemporaryDirectory()
        let port = try Reverse.freePort()
        try await withOrigin { origin in
            try await withReverseProxy(["127.0.0.1:\(port)=http://127.0.0.1:\(origin.port)"], in: directory) { proxy, _ in
                let response = try await Reverse.curl("http://127.0.0.1:\(port)/echo/x",
                                                      ["-x", "http://127.0.0.1:\(proxy.port)"])
                #expect(response.status == 200, "\(response.bodyText)")
                #expect(origin.requests.map(\.target) == ["/echo/x"])
            }
        }
    }

    @Test("a reverse listen port already in use stops the start with a message naming the value")
    func portInUse() async throws {
        try await withOrigin { origin in
            let value = "127.0.0.1:\(origin.port)=http://127.0.0.1:\(origin.port)"
            let failure = await startFailure { $0.reverseRoutes = [try! ReverseRoute(parsing: value)] }
            let message = try #require(failure)
            #expect(message.contains("--reverse \(value): cannot listen on 127.0.0.1:\(origin.port)"), "\(message)")
            #expect(message.lowercased().contains("in use"), "\(message)")
        }
    }

    @Test("--reverse-cert that cannot be used stops the start, naming the file and what it must hold",
          arguments: ["missing", "no-key", "no-certificate", "wrong-key", "encrypted-key"])
    func unusableCertificate(_ kind: String) async throws {
        let directory = try TemporaryDirectory()
        let path: String
        let expected: String
        switch kind {
        case "missing":
            (path, expected) = (directory.path + "/nope.pem", "cannot read it")
        case "no-key":
            (path, expected) = (try directory.write(L.pem + I.pem, to: "f.pem"), "no PEM private key")
        case "no-certificate":
            (path, expected) = (try directory.write(L.privateKeyPEM, to: "f.pem"), "no PEM certificate")
        case "wrong-key":
            (path, expected) = (try directory.write(L.pem + S.privateKeyPEM, to: "f.pem"), "does not match")
        default:
            let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n"
            (path, expected) = (try directory.write(L.pem + encrypted, to: "f.pem"), "encrypted")
        }
        let failure = await startFailure { configuration in
            configuration.reverseRoutes = [try! ReverseRoute(parsing: "127.0.0.1:0=https://localhost:1")]
            configuration.reverseCertificatePath = path
            configuration.caDirectory = directory.path + "/ca"
        }
        let message = try #require(failure)
        #expect(message.hasPrefix("hookproxy: --reverse-cert \(path): "), "\(message)")
        #expect(message.contains(expected), "\(message)")
        #expect(message.contains("the server's first, and its unencrypted private key"), "\(message)")
    }
}
