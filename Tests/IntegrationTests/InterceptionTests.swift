import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing
import X509

/// Issue 5, "Shown by": HTTPS interception through real sockets. A TLS TestOrigin on 127.0.0.1:0 presents
/// L (localhost, 127.0.0.1) + I; hookproxy runs in-process on 127.0.0.1:0 with a CA in a temporary directory and
/// trusts the origin through a `trust` rule `{ca_file: R}` (libcurl's system store does not know the test root);
/// the clients are the real curl binary and `TunnelClient` (NIOSSL, trusting only the roots it is given).
@Suite("HTTPS interception (issue 5)", .timeLimit(.minutes(3)))
struct InterceptionTests {
    static let testCA = TestCA.shared
    var R: TestCertificate { Self.testCA.root }
    var I: TestCertificate { Self.testCA.intermediate }
    var L: TestCertificate { Self.testCA.leaf }
    var S: TestCertificate { Self.testCA.selfSigned }

    // MARK: interception works, and the client sees hookproxy's leaf

    @Test("curl trusting the hookproxy CA gets the origin's bytes over HTTPS (DNS host)")
    func curlDNS() async throws {
        try await intercepted(["localhost"]) { origin, proxy, ca in
            let url = "https://localhost:\(origin.port)/head-test"
            let response = try await Hooks.curl(proxy, url, ["-v", "--cacert", ca.certificatePath])
            #expect(response.exitCode == 0, "\(response.stderr)")
            #expect(response.status == 200, "\(response.bodyText)")
            #expect(response.bodyText == "head-test body\n")
            #expect(response.header("X-Head-Test") == "yes")
            // curl -v names the certificate it verified: issued by the hookproxy CA, matched on the DNS name.
            #expect(response.stderr.contains("issuer: CN=hookproxy CA") || response.stderr.contains("issuer: O=hookproxy"),
                    "\(response.stderr)")
            #expect(response.stderr.contains("subject: CN=localhost"), "\(response.stderr)")
            #expect(origin.requests.map(\.target) == ["/head-test"])
            let records = await Hooks.records(proxy)
            #expect(records.first?.url == url, "\(records.map(\.url))")
            #expect(Hooks.eventTexts(records).contains("intercepted"), "\(Hooks.eventTexts(records))")
            #expect(proxy.server.interceptionSignings == 1)
        }
    }

    @Test("curl trusting the hookproxy CA gets the origin's bytes over HTTPS (IP host)")
    func curlIP() async throws {
        try await intercepted(["127.0.0.1"]) { origin, proxy, ca in
            let response = try await Hooks.curl(proxy, "https://127.0.0.1:\(origin.port)/head-test",
                                                ["-v", "--cacert", ca.certificatePath])
            #expect(response.exitCode == 0, "\(response.stderr)")
            #expect(response.status == 200, "\(response.bodyText)")
            #expect(response.bodyText == "head-test body\n")
            #expect(response.stderr.contains("hookproxy CA"), "\(response.stderr)")
            #expect(origin.requests.count == 1)
        }
    }

    @Test("a Swift TLS client trusting only the CA sees a leaf issued by it for the DNS name, ALPN http/1.1 when offered alone")
    func swiftClientDNS() async throws {
        try await intercepted(["localhost"]) { origin, proxy, ca in
            let result = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [ca.certificate], alpn: ["http/1.1"])
            #expect(result.connectStatus == 200, "\(result.connectHead)")
            #expect(result.failure == nil, "\(result.failure ?? "")")
            #expect(result.status == 200, "\(result.response)")
            #expect(result.body == "head-test body\n")
            #expect(result.negotiatedProtocol == "http/1.1", "an HTTP/1.1-only client gets http/1.1 (h2: HTTP2ClientTests)")
            let peer = try #require(result.peer)
            #expect(peer.issuer == ca.certificate.subject, "\(peer.issuer)")
            #expect(ca.certificate.publicKey.isValidSignature(peer.signature, for: peer))
            #expect(peer.sanNames == ["DNS:localhost"], "\(peer.sanNames)")
            #expect(peer != L.certificate)
            #expect(try peer.extensions.basicConstraints == .notCertificateAuthority)
            #expect(peer.notValidAfter.timeIntervalSinceNow < 31 * 86_400, "a leaf is short-lived")
            #expect(origin.requests.count == 1)
        }
    }

    @Test("a Swift TLS client trusting only the CA sees a leaf with an IP SAN for an IP host")
    func swiftClientIP() async throws {
        try await intercepted(["127.0.0.1"]) { origin, proxy, ca in
            let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                    trustRoots: [ca.certificate])
            #expect(result.failure == nil, "\(result.failure ?? "")")
            #expect(result.status == 200, "\(result.response)")
            #expect(result.body == "head-test body\n")
            let peer = try #require(result.peer)
            #expect(peer.issuer == ca.certificate.subject)
            #expect(ca.certificate.publicKey.isValidSignature(peer.signature, for: peer))
            #expect(peer.sanNames == ["IP:127.0.0.1"], "\(peer.sanNames)")
        }
    }

    // MARK: rules inside the tunnel

    @Test("a response rule applies inside the intercepted tunnel")
    func responseRuleInside() async throws {
        let extra = """
              - name: mark
                match: { host: localhost, scheme: https }
                response: { set_headers: { X-Intercepted: "yes" } }

            """
        try await intercepted(["localhost"], extraRules: extra) { origin, proxy, ca in
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test",
                                                ["--cacert", ca.certificatePath])
            #expect(response.status == 200, "\(response.bodyText)")
            #expect(response.header("X-Intercepted") == "yes", "\(response.headers)")
            #expect(response.bodyText == "head-test body\n")
            let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [ca.certificate])
            #expect(tunnel.header("X-Intercepted") == "yes", "\(tunnel.response)")
        }
    }

    @Test("request edits and a local respond rule apply inside the intercepted tunnel")
    func requestRulesInside() async throws {
        let extra = """
              - name: mocked
                match: { host: localhost, path: "/mocked" }
                respond: { status: 201, headers: { X-Mock: "yes" }, body: "mocked inside TLS" }
              - name: tag-request
                match: { host: localhost, scheme: https }
                request: { set_headers: { X-Debug: "1" } }

            """
        try await intercepted(["localhost"], extraRules: extra) { origin, proxy, ca in
            let mocked = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/mocked",
                                              ["--cacert", ca.certificatePath])
            #expect(mocked.status == 201, "\(mocked.stderr)")
            #expect(mocked.header("X-Mock") == "yes")
            #expect(mocked.bodyText == "mocked inside TLS")
            #expect(origin.requests.isEmpty, "answered by hookproxy inside the tunnel")

            let edited = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/headers",
                                              ["--cacert", ca.certificatePath])
            #expect(edited.status == 200)
            #expect(origin.requests.last?.header("X-Debug") == "1", "\(edited.bodyText)")
            let records = await Hooks.records(proxy, count: 2)
            #expect(records.allSatisfy { $0.events.first?.logText == "intercepted" }, "\(records.map(\.events))")
        }
    }

    @Test("the leaf is minted for the SNI name when it differs from the CONNECT host")
    func leafForSNI() async throws {
        try await intercepted(["127.0.0.1"]) { origin, proxy, ca in
            let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                    trustRoots: [ca.certificate], serverName: "localhost")
            #expect(result.failure == nil, "\(result.failure ?? "")")
            #expect(result.status == 200, "\(result.response)")
            #expect(result.peer?.sanNames == ["DNS:localhost"], "\(result.peer?.sanNames ?? [])")
            #expect(result.peer?.issuer == ca.certificate.subject)
            #expect(origin.requests.count == 1)
        }
    }

    @Test("a trust rule with a wrong pin gives 502 inside TLS and the origin gets no request bytes")
    func wrongPin() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        let rules = """
            rules:
              - name: wrong-pin
                match: { host: localhost }
                trust: { pinning: public_key, pins: \(yamlList([S.spkiPin])), ca_file: "\(root)" }

            """
        try await intercepted(["localhost"], rules: rules, directory: directory) { origin, proxy, ca in
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test",
                                                ["--cacert", ca.certificatePath])
            #expect(response.exitCode == 0, "the client's TLS to hookproxy succeeded: \(response.stderr)")
            #expect(response.status == 502, "\(response.bodyText)")
            #expect(response.bodyText.hasPrefix("hookproxy: trust rejected localhost"), "\(response.bodyText)")
            let records = await Hooks.records(proxy)
            let trust = records.flatMap(\.events).filter { $0.hook == .trust }
            #expect(trust.map(\.action) == ["trust rejected"], "\(trust)")
            #expect(origin.requests.isEmpty)
            #expect(!origin.receivedAnyRequestBytes)
        }
    }

    // MARK: what is not intercepted

    @Test("a non-matching host is tunnelled blind: the client sees the real server certificate")
    func nonMatchingBlind() async throws {
        try await intercepted(["*.example.test"]) { origin, proxy, ca in
            let rootPath = ca.directory + "/../R.pem"
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test",
                                                ["--cacert", rootPath])
            #expect(response.exitCode == 0, "\(response.stderr)")
            #expect(response.status == 200)
            #expect(response.bodyText == "head-test body\n")

            let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [R.certificate])
            #expect(tunnel.failure == nil, "\(tunnel.failure ?? "")")
            #expect(tunnel.status == 200)
            let peer = try #require(tunnel.peer)
            #expect(peer.issuer == I.certificate.subject, "\(peer.issuer)")
            #expect(peer == L.certificate)

            // Trusting only the hookproxy CA does not help: nobody minted anything.
            let onlyHookproxy = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/head-test",
                                                     ["--cacert", ca.certificatePath])
            #expect(onlyHookproxy.exitCode == 60, "\(onlyHookproxy.stderr)")
            #expect(proxy.server.interceptionSignings == 0)
            // Blind tunnels are not exchanges hookproxy can see: nothing recorded as intercepted.
            let records = proxy.recorder.records
            #expect(!Hooks.eventTexts(records).contains("intercepted"), "\(Hooks.eventTexts(records))")
        }
    }

    @Test("an intercept: false rule overrides --intercept *")
    func interceptFalseOverrides() async throws {
        let extra = """
              - name: leave-localhost-alone
                match: { host: localhost }
                intercept: false

            """
        try await intercepted(["*"], extraRules: extra) { origin, proxy, ca in
            let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [R.certificate])
            #expect(tunnel.status == 200, "\(tunnel.failure ?? tunnel.response)")
            #expect(tunnel.peer == L.certificate, "localhost is tunnelled blind")
            #expect(proxy.server.interceptionSignings == 0)

            // Another host still falls to --intercept *.
            let intercepted = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                         trustRoots: [ca.certificate])
            #expect(intercepted.status == 200, "\(intercepted.failure ?? intercepted.response)")
            #expect(intercepted.peer?.issuer == ca.certificate.subject)
            #expect(proxy.server.interceptionSignings == 1)
        }
    }

    @Test("an intercept: true rule intercepts without --intercept")
    func interceptTrueRule() async throws {
        let extra = """
              - name: intercept-localhost
                match: { host: localhost }
                intercept: true

            """
        try await intercepted([], extraRules: extra) { origin, proxy, ca in
            let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [ca.certificate])
            #expect(tunnel.status == 200, "\(tunnel.failure ?? tunnel.response)")
            #expect(tunnel.peer?.issuer == ca.certificate.subject)
            // 127.0.0.1 matches no intercept rule and there is no --intercept: blind.
            let blind = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                   trustRoots: [R.certificate])
            #expect(blind.peer == L.certificate, "\(blind.failure ?? "")")
        }
    }

    // MARK: clients that refuse

    @Test("a client that does not trust the CA fails, and the next client that does succeeds")
    func untrustedThenTrusted() async throws {
        try await intercepted(["localhost"]) { origin, proxy, ca in
            let url = "https://localhost:\(origin.port)/head-test"
            let refused = try await Hooks.curl(proxy, url)
            #expect(refused.exitCode == 60, "curl: the certificate is not trusted: \(refused.stderr)")
            let refusedSwift = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                          trustRoots: [R.certificate])
            #expect(refusedSwift.failure != nil)
            #expect(refusedSwift.response.isEmpty)
            #expect(origin.requests.isEmpty)

            let accepted = try await Hooks.curl(proxy, url, ["--cacert", ca.certificatePath])
            #expect(accepted.exitCode == 0, "\(accepted.stderr)")
            #expect(accepted.status == 200)
            #expect(accepted.bodyText == "head-test body\n")
            let acceptedSwift = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                           trustRoots: [ca.certificate])
            #expect(acceptedSwift.status == 200, "\(acceptedSwift.failure ?? acceptedSwift.response)")
            #expect(origin.requests.count == 2)
        }
    }

    @Test("hookproxy run: a refusal is logged once per host, summarised at shutdown; --intercept and --ca-dir work")
    func refusalLoggedOnce() async throws {
        try await withOrigin(tls: Self.testCA.identity([L, I])) { origin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([R], to: "R.pem")
            try directory.write(Self.trustRule(root), to: "rules/rules.yaml")
            let caDirectory = directory.path + "/ca"
            try await withRunningHookproxy(["--intercept", "localhost", "--ca-dir", caDirectory,
                                            "--rules", directory.path + "/rules"], in: directory) { hookproxy in
                let url = "https://localhost:\(origin.port)/head-test"
                let curl = ["-s", "-S", "--max-time", "20", "-x", hookproxy.proxyURL]
                for _ in 0..<2 {
                    let refused = try await CurlCLI.run(curl + [url], timeout: .seconds(30))
                    #expect(refused.exitCode == 60, "\(refused.stderr)")
                }
                let caPath = caDirectory + "/" + CertificateAuthority.certificateFile
                let accepted = try await CurlCLI.run(curl + ["--cacert", caPath, url], timeout: .seconds(30))
                #expect(accepted.exitCode == 0, "\(accepted.stderr)")
                #expect(accepted.stdoutText == "head-test body\n")
                let warning = "client rejected hookproxy's certificate for localhost"
                #expect(await eventually(timeout: .seconds(5)) { hookproxy.stderr.contains(warning) },
                        "\(hookproxy.stderr)")
                let status = await hookproxy.stop()
                #expect(status == 0)
                let stderr = hookproxy.stderr
                #expect(occurrences(of: warning, in: stderr) == 1, "\(stderr)")
                #expect(stderr.contains("it may pin its server certificate, or not trust the CA (hookproxy ca path)"))
                #expect(stderr.contains("clients refused hookproxy's certificate (interception) for: localhost"),
                        "\(stderr)")
                #expect(!stderr.contains("PRIVATE KEY"), "the CA key is never logged")
                #expect(try Self.mode(caPath) == 0o600)
                #expect(try Self.mode(caDirectory + "/" + CertificateAuthority.keyFile) == 0o600)
            }
        }
    }

    // MARK: the CA on disk, the leaf cache

    @Test("the CA files are created on first need with mode 0600")
    func caFileModes() async throws {
        try await intercepted(["localhost"], createCA: false) { origin, proxy, ca in
            let certificate = ca.certificatePath, key = ca.keyPath
            let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                    trustRoots: [ca.certificate])
            #expect(tunnel.status == 200, "\(tunnel.failure ?? tunnel.response)")
            #expect(try Self.mode(certificate) == 0o600)
            #expect(try Self.mode(key) == 0o600)
            let keyText = try String(contentsOfFile: key, encoding: .utf8)
            #expect(keyText.contains("PRIVATE KEY"))
            let ca = try Certificate(pemEncoded: try String(contentsOfFile: certificate, encoding: .utf8))
            #expect(try ca.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
            #expect(try ca.extensions.keyUsage?.keyCertSign == true)
            #expect(ca.subject.description.contains("hookproxy"))
            #expect(ca.notValidAfter.timeIntervalSinceNow > 9 * 365 * 86_400, "about ten years")
        }
    }

    @Test("the leaf cache is reused: many requests on several connections to one host cost one signing")
    func leafCacheReused() async throws {
        try await intercepted(["localhost", "127.0.0.1"]) { origin, proxy, ca in
            let url = "https://localhost:\(origin.port)/head-test"
            for _ in 0..<3 {  // three curl processes: three connections, three handshakes
                let response = try await Hooks.curl(proxy, url, ["--cacert", ca.certificatePath])
                #expect(response.status == 200, "\(response.stderr)")
            }
            // One curl, three URLs: one connection reused.
            let many = try await CurlCLI.run(["-s", "-S", "--max-time", "20", "-x", proxy.proxyURL,
                                              "--cacert", ca.certificatePath, url, url, url], timeout: .seconds(30))
            #expect(many.stdoutText == String(repeating: "head-test body\n", count: 3), "\(many.stderr)")
            for _ in 0..<2 {
                let tunnel = try await TunnelClient.get(proxyPort: proxy.port, host: "localhost", port: origin.port,
                                                        trustRoots: [ca.certificate])
                #expect(tunnel.status == 200)
            }
            #expect(origin.requests.count == 8)
            #expect(proxy.server.interceptionSignings == 1)

            // Another host is another leaf.
            let ip = try await Hooks.curl(proxy, "https://127.0.0.1:\(origin.port)/head-test",
                                          ["--cacert", ca.certificatePath])
            #expect(ip.status == 200)
            #expect(proxy.server.interceptionSignings == 2)
        }
    }

    @Test("concurrent first connections to one host cost one signing")
    func leafCacheConcurrent() async throws {
        try await intercepted(["localhost"]) { origin, proxy, ca in
            let port = proxy.port, originPort = origin.port, root = ca.certificate
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await TunnelClient.get(proxyPort: port, host: "localhost", port: originPort,
                                                   trustRoots: [root]).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 10))
            #expect(proxy.server.interceptionSignings == 1)
        }
    }

    // MARK: the onboarding page

    @Test("hookproxy's own address serves the onboarding page and /ca.pem, never forwarded")
    func onboardingPage() async throws {
        try await intercepted(["*"]) { origin, proxy, ca in
            for host in ["127.0.0.1", "localhost"] {
                let page = try await Hooks.curl(proxy, "http://\(host):\(proxy.port)/")
                #expect(page.status == 200, "\(page.stderr)")
                #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
                #expect(page.bodyText.contains("hookproxy \(HookproxyVersion.current)"), "\(page.bodyText)")
                #expect(page.bodyText.contains("/ca.pem"))

                let pem = try await Hooks.curl(proxy, "http://\(host):\(proxy.port)/ca.pem")
                #expect(pem.status == 200)
                #expect(pem.bodyText == ca.certificatePEM)
                #expect(try Certificate(pemEncoded: pem.bodyText) == ca.certificate)
            }
            // Without the proxy setting (origin-form, Host: hookproxy itself), e.g. a phone's browser.
            let direct = try await CurlCLI.run(["-s", "-S", "--max-time", "20", "http://127.0.0.1:\(proxy.port)/ca.pem"],
                                               timeout: .seconds(30))
            #expect(direct.stdoutText == ca.certificatePEM, "\(direct.stderr)")
            #expect(origin.acceptedConnections == 0, "nothing was forwarded")
        }
    }

    // MARK: machinery

    /// The trust rule every interception test needs: the origin's chain (L, I) builds to R.
    static func trustRule(_ rootPath: String) -> String {
        """
        rules:
          - name: trust-test-root
            match: { host: [localhost, "127.0.0.1"] }
            trust: { ca_file: "\(rootPath)" }

        """
    }

    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// A TLS origin (L + I), hookproxy with `--intercept` globs, a CA in a temporary directory (created first unless
    /// `createCA` is false) and the trust rule (plus `extraRules` appended, or `rules` instead).
    func intercepted(_ globs: [String], extraRules: String = "", rules: String? = nil,
                     directory: TemporaryDirectory? = nil, createCA: Bool = true,
                     _ body: (TestOrigin, ProxyHarness, CertificateAuthority) async throws -> Void) async throws {
        let directory = try directory ?? TemporaryDirectory()
        let root = try directory.writePEM([R], to: "R.pem")
        let store = try Hooks.store(directory, rules ?? (Self.trustRule(root) + extraRules))
        let caDirectory = directory.path + "/ca"
        try await withOrigin(tls: Self.testCA.identity([L, I])) { origin in
            try await withHookProxy(rules: store, { configuration in
                configuration.interceptHosts = globs.compactMap(HostGlob.init)
                configuration.caDirectory = caDirectory
            }) { proxy in
                if !createCA {
                    #expect(!FileManager.default.fileExists(atPath: caDirectory), "no CA before it is needed")
                }
                let ca = try proxy.server.certificateAuthority()
                #expect(ca.directory == caDirectory, "never ~/.hookproxy")
                try await body(origin, proxy, ca)
            }
        }
    }
}
