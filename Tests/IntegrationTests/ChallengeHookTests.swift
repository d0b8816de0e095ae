import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `on_challenge` and `--upstream-proxy` through real sockets, against TestOrigin routes that really check the
/// credentials (`/auth/basic`, `/auth/digest` verifies the Digest response hash), a TLS origin that requires a client
/// certificate, and a TestOrigin acting as an authenticating upstream proxy.
@Suite("on_challenge", .timeLimit(.minutes(2)))
struct ChallengeHookTests {
    static let user = "alice"
    static let password = "pw-Zq81-never-logged"

    /// A rule for every request to 127.0.0.1 with this `on_challenge`.
    static func rule(_ onChallenge: String) -> String {
        """
        rules:
          - name: challenges
            match: { host: "127.0.0.1" }
            on_challenge: \(onChallenge)

        """
    }

    static func useCredential(_ schemes: String? = nil, password: String = ChallengeHookTests.password) -> String {
        rule("{ action: use_credential, \(schemes.map { "schemes: \($0), " } ?? "")username: \(user), password: \"\(password)\" }")
    }

    static func authPath(_ scheme: String, password: String = ChallengeHookTests.password) -> String {
        "/auth/\(scheme)?user=\(user)&pass=\(password)"
    }

    func with(_ rules: String?, environment: [String: String] = [:],
              _ body: (TestOrigin, ProxyHarness) async throws -> Void) async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let store = try rules.map { try Hooks.store(directory, $0, environment: environment) }
            try await withHookProxy(rules: store) { proxy in
                try await body(origin, proxy)
            }
        }
    }

    /// The credential appears nowhere in what the log gets: events, errors, URLs, request headers.
    func expectNoSecret(_ records: [FlowRecord], sourceLocation: SourceLocation = #_sourceLocation) {
        let basic = Data("\(Self.user):\(Self.password)".utf8).base64EncodedString()
        for record in records {
            var texts = record.events.flatMap { [$0.action, $0.detail] }
            // (Not the URL: the test routes take the expected password in their query.)
            texts += [record.error ?? ""]
            texts += record.request.headers.map { "\($0.name): \($0.value)" }
            for text in texts {
                #expect(!text.contains(Self.password) && !text.contains(basic), "secret in log text: \(text)",
                        sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: pass, cancel

    @Test("pass (default and explicit): the client gets the 401", arguments: [nil, "{ action: pass }"])
    func pass(onChallenge: String?) async throws {
        try await with(onChallenge.map(Self.rule)) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath("basic"))
            #expect(response.status == 401)
            #expect(response.header("WWW-Authenticate") == "Basic realm=\"test\"")
            #expect(response.bodyText == "unauthorized\n")
            #expect(origin.requests.count == 1)
            let records = await Hooks.records(proxy)
            #expect(!records.flatMap(\.events).contains { $0.hook == .challenge })
        }
    }

    @Test("cancel: 502 naming the challenge", arguments: ["basic", "digest"])
    func cancel(scheme: String) async throws {
        try await with(Self.rule("{ action: cancel }")) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath(scheme))
            #expect(response.status == 502)
            #expect(response.bodyText.hasPrefix("hookproxy: challenge cancelled 127.0.0.1:\(origin.port)"),
                    "\(response.bodyText)")
            #expect(response.bodyText.contains("401"))
            #expect(response.bodyText.contains(scheme == "basic" ? "Basic realm=\"test\"" : "Digest realm=\"test\""),
                    "\(response.bodyText)")
            #expect(origin.requests.count == 1)
            let records = await Hooks.records(proxy)
            let events = records.flatMap(\.events).filter { $0.hook == .challenge }
            #expect(events.map(\.action) == ["challenge cancelled"])
            #expect(records.first?.error?.hasPrefix("hookproxy: challenge cancelled") == true)
        }
    }

    // MARK: use_credential

    @Test("use_credential basic: 200 and `challenge answered basic`; the credential waits for the challenge")
    func basic() async throws {
        try await with(Self.useCredential("[basic]")) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath("basic"))
            #expect(response.status == 200)
            #expect(response.header("X-Method") == "GET")
            #expect(origin.requests.count == 2)
            #expect(origin.requests.first?.header("Authorization") == nil)
            let basic = "Basic " + Data("\(Self.user):\(Self.password)".utf8).base64EncodedString()
            #expect(origin.requests.last?.header("Authorization") == basic)
            let records = await Hooks.records(proxy)
            #expect(records.count == 1, "the client sees one exchange; curl's second round is inside it")
            let events = records.flatMap(\.events).filter { $0.hook == .challenge }
            #expect(events.map(\.action) == ["challenge answered basic"])
            #expect(records.first?.response?.status == 200)
            expectNoSecret(records)
        }
    }

    @Test("use_credential digest (really verified by the origin)", arguments: ["[digest]", nil])
    func digest(schemes: String?) async throws {
        try await with(Self.useCredential(schemes)) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath("digest"))
            #expect(response.status == 200)
            #expect(response.header("X-Digest-Verified") == "true")
            #expect(origin.digestSuccesses == 1)
            #expect(origin.requests.last?.header("Authorization")?.hasPrefix("Digest ") == true)
            let records = await Hooks.records(proxy)
            let events = records.flatMap(\.events).filter { $0.hook == .challenge }
            #expect(events.map(\.action) == ["challenge answered digest"])
            expectNoSecret(records)
        }
    }

    @Test("a wrong password: the client gets the server's final 401", arguments: ["basic", "digest"])
    func wrongPassword(scheme: String) async throws {
        try await with(Self.useCredential("[\(scheme)]")) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath(scheme, password: "other"))
            #expect(response.status == 401)
            #expect(response.bodyText == "unauthorized\n")
            #expect(response.header("WWW-Authenticate")?.hasPrefix(scheme == "basic" ? "Basic" : "Digest") == true)
            #expect(origin.digestSuccesses == 0)
            #expect(origin.requests.count == 2, "one challenge, one refused answer, no retry loop")
            let records = await Hooks.records(proxy)
            let events = records.flatMap(\.events).filter { $0.hook == .challenge }
            #expect(events.map(\.action) == ["challenge failed"])
            expectNoSecret(records)
        }
    }

    @Test("a challenge offering none of the rule's schemes: the client gets the server's 401")
    func schemeNotOffered() async throws {
        try await with(Self.useCredential("[digest]")) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath("basic"))
            #expect(response.status == 401)
            #expect(response.header("WWW-Authenticate") == "Basic realm=\"test\"")
            #expect(origin.requests.allSatisfy { $0.header("Authorization") == nil }, "no credential sent unasked")
        }
    }

    @Test("credential from password_env and from ${VAR}", arguments: ["password_env", "${}"])
    func environmentCredential(form: String) async throws {
        // The environment is handed to the loader, never set with setenv: other tests spawn processes
        // concurrently, and setenv racing a spawn's copy of environ can crash the test process.
        let name = "HOOKPROXY_IT4_PW_\(UUID().uuidString.prefix(8))"
        var environment = ProcessInfo.processInfo.environment
        environment[name] = Self.password
        let key = form == "password_env" ? "password_env: \(name)" : "password: \"${\(name)}\""
        let rules = Self.rule("{ action: use_credential, schemes: [basic], username: \(Self.user), \(key) }")
        try await with(rules, environment: environment) { origin, proxy in
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath("basic"))
            #expect(response.status == 200)
            let records = await Hooks.records(proxy)
            #expect(records.flatMap(\.events).map(\.action).contains("challenge answered basic"))
            expectNoSecret(records)
        }
    }

    @Test("the POST body is replayed for the second round",
          arguments: [("basic", false), ("basic", true), ("digest", false), ("digest", true)])
    func postBodyReplayed(scheme: String, chunked: Bool) async throws {
        try await with(Self.useCredential("[\(scheme)]")) { origin, proxy in
            let body = String(repeating: "replay me ", count: 500)
            var args = ["--data-binary", body, "-H", "Content-Type: text/plain"]
            if chunked { args += ["-H", "Transfer-Encoding: chunked"] }
            let response = try await Hooks.curl(proxy, origin.baseURL + Self.authPath(scheme), args)
            #expect(response.status == 200)
            #expect(response.header("X-Method") == "POST")
            #expect(response.bodyText == body)
            #expect(origin.requests.last?.body == Array(body.utf8))
            if scheme == "digest" { #expect(origin.digestSuccesses == 1) }
        }
    }

    // MARK: client certificate

    @Test("client certificate: presented when the TLS origin asks, whatever the action; without it the handshake fails")
    func clientCertificate() async throws {
        let ca = TestCA.shared
        try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate]), clientCA: ca.clientCA) { origin in
            let directory = try TemporaryDirectory()
            let store = try Hooks.clientCertificateRules(in: directory, port: origin.port)
            try await withHookProxy(rules: store) { proxy in
                let response = try await Hooks.curl(proxy, "http://c.test/head-test")
                #expect(response.status == 200, "\(response.bodyText)")
                #expect(response.bodyText == "head-test body\n")
                #expect(origin.connections.contains { $0.clientCertificatePresented })
                #expect(origin.requests.count == 1)

                let refused = try await Hooks.curl(proxy, "http://n.test/head-test")
                #expect(refused.status == 502, "\(refused.bodyText)")
                #expect(refused.bodyText.hasPrefix("hookproxy: "), "\(refused.bodyText)")
                #expect(origin.requests.count == 1, "no request without a client certificate")
            }
        }
    }

    // MARK: upstream proxy

    @Test("--upstream-proxy: all upstream traffic goes through it; its 407 is answered from the URL's userinfo")
    func upstreamProxy() async throws {
        let credentials = TestOrigin.Credentials(user: "up", password: "up-Pw-77")
        try await withOrigin(proxyAuth: credentials) { upstream in
            try await withOrigin { target in
                let url = "http://up:up-Pw-77@127.0.0.1:\(upstream.port)"
                try await withHookProxy(rules: nil, { $0.upstream.upstreamProxy = url }) { proxy in
                    let response = try await Hooks.curl(proxy, "\(target.baseURL)/echo",
                                                        ["--data-binary", "via upstream"])
                    #expect(response.status == 200, "\(response.bodyText)")
                    #expect(response.bodyText == "via upstream")
                    let forwarded = upstream.requests.filter { $0.target.hasPrefix("http://") }
                    #expect(forwarded.last?.target == "\(target.baseURL)/echo")
                    let basic = "Basic " + Data("up:up-Pw-77".utf8).base64EncodedString()
                    #expect(forwarded.last?.header("Proxy-Authorization") == basic)
                    #expect(target.requests.count == 1)
                    #expect(target.requests.first?.header("Proxy-Authorization") == nil)
                    let records = await Hooks.records(proxy)
                    for record in records {
                        let texts = record.events.map(\.logText) + [record.error ?? ""]
                        #expect(!texts.contains { $0.contains("up-Pw-77") })
                    }
                }
            }
        }
    }

    @Test("--upstream-proxy with a wrong password: the client gets the proxy's 407, the target nothing")
    func upstreamProxyWrongPassword() async throws {
        let credentials = TestOrigin.Credentials(user: "up", password: "right")
        try await withOrigin(proxyAuth: credentials) { upstream in
            try await withOrigin { target in
                let url = "http://up:wrong@127.0.0.1:\(upstream.port)"
                try await withHookProxy(rules: nil, { $0.upstream.upstreamProxy = url }) { proxy in
                    let response = try await Hooks.curl(proxy, "\(target.baseURL)/echo")
                    #expect(response.status == 407, "\(response.bodyText)")
                    #expect(target.requests.isEmpty)
                }
            }
        }
    }

    @Test("--upstream-proxy carries TLS through a CONNECT tunnel; trust still judges the origin")
    func upstreamProxyTunnelsTLS() async throws {
        let ca = TestCA.shared
        let credentials = TestOrigin.Credentials(user: "up", password: "up-Pw-77")
        try await withOrigin(proxyAuth: credentials) { upstream in
            try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { target in
                let directory = try TemporaryDirectory()
                let root = try directory.writePEM([ca.root], to: "root.pem")
                let store = try Hooks.store(directory, """
                    rules:
                      - name: pinned
                        match: { host: t.test }
                        map_remote: { to: "https://localhost:\(target.port)" }
                        trust: { pinning: public_key, pins: ["\(ca.intermediate.spkiPin)"], ca_file: "\(root)" }

                    """)
                let url = "http://up:up-Pw-77@127.0.0.1:\(upstream.port)"
                try await withHookProxy(rules: store, { $0.upstream.upstreamProxy = url }) { proxy in
                    let response = try await Hooks.curl(proxy, "http://t.test/head-test")
                    let events = await Hooks.records(proxy).flatMap(\.events).filter { $0.hook == .trust }
                    // CONNECT goes to the upstream proxy (curl may probe once without credentials, then answers
                    // its 407 from the URL's userinfo); TLS to the origin runs inside the tunnel and trust judges it.
                    #expect(upstream.requests.allSatisfy { $0.method == "CONNECT" && $0.target == "localhost:\(target.port)" })
                    let basic = "Basic " + Data("up:up-Pw-77".utf8).base64EncodedString()
                    #expect(upstream.requests.last?.header("Proxy-Authorization") == basic)
                    #expect(response.status == 200, "\(response.bodyText)")
                    #expect(target.requests.count == 1)
                    #expect(events.map(\.action) == ["trust accepted"])
                }
            }
        }
    }

    @Test("--upstream-proxy carries a client's CONNECT tunnel too")
    func upstreamProxyCarriesClientTunnels() async throws {
        let ca = TestCA.shared
        let credentials = TestOrigin.Credentials(user: "up", password: "up-Pw-77")
        try await withOrigin(proxyAuth: credentials) { upstream in
            try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { target in
                let directory = try TemporaryDirectory()
                let root = try directory.writePEM([ca.root], to: "root.pem")
                let url = "http://up:up-Pw-77@127.0.0.1:\(upstream.port)"
                try await withHookProxy(rules: nil, { $0.upstream.upstreamProxy = url }) { proxy in
                    let response = try await Hooks.curl(proxy, "https://localhost:\(target.port)/head-test",
                                                        ["--cacert", root, "--max-time", "5"])
                    #expect(response.status == 200, "\(response.stderr)")
                    #expect(upstream.requests.allSatisfy { $0.method == "CONNECT" })
                    #expect(upstream.requests.last?.header("Proxy-Authorization") != nil)
                }
            }
        }
    }
}
