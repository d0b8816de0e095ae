import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 2: CONNECT blind tunnels, and `--proxy-auth` (plain requests and CONNECT).
@Suite("CONNECT tunnels and proxy authentication")
struct ProxyTunnelTests {
    /// A TLS TestOrigin presenting leaf + intermediate, and a directory with `root.pem` to trust it.
    func withTLSOrigin<T>(_ body: (TestOrigin, String) async throws -> T) async throws -> T {
        let ca = TestCA.shared
        let directory = try TemporaryDirectory()
        let rootPEM = try directory.writePEM([ca.root], to: "root.pem")
        return try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { origin in
            try await body(origin, rootPEM)
        }
    }

    @Test("curl's https request tunnels through CONNECT to a TLS origin, byte for byte both ways")
    func blindTunnel() async throws {
        try await withTLSOrigin { origin, rootPEM in
            try await withProxy { proxy in
                let download = try await curlThrough(proxy, ["--cacert", rootPEM, "https://localhost:\(origin.port)/bytes/3000000"],
                                                     timeout: .seconds(60))
                #expect(download.exitCode == 0, "\(download.stderr)")
                #expect(isPattern(download.stdout, count: 3_000_000), "\(patternMismatch(download.stdout, count: 3_000_000))")

                let directory = try TemporaryDirectory()
                let upload = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
                let file = try directory.write(upload, to: "up.bin")
                let posted = try await curlThrough(proxy, ["--cacert", rootPEM, "--data-binary", "@\(file)",
                                                           "https://127.0.0.1:\(origin.port)/sha256"], timeout: .seconds(60))
                #expect(posted.exitCode == 0, "\(posted.stderr)")
                #expect(posted.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "\(sha256Hex(upload)) 2000000")
                // The TLS sessions were end to end: the origin completed the handshakes itself.
                #expect(origin.tlsHandshakes == 2)
            }
        }
    }

    @Test("a raw CONNECT answers 200 and then carries bytes unchanged")
    func rawConnect() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                let established = try await client.readResponse(method: "CONNECT")
                #expect(established.status == 200)
                // Now plain HTTP to the origin inside the tunnel: the origin sees origin-form, unrewritten.
                try await client.send(rawRequest("GET /headers HTTP/1.1", ["Host: tunnelled.example", "Proxy-Connection: stays"]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.bodyText.hasPrefix("GET /headers HTTP/1.1\r\nHost: tunnelled.example\r\nProxy-Connection: stays\r\n"),
                        "\(response.bodyText)")
            }
        }
    }

    @Test("CONNECT to a refused port answers 502 with the reason; the proxy still serves")
    func connectRefused() async throws {
        let dead = try await TestOrigin.start()
        let port = dead.port
        try await dead.shutdown()
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("CONNECT 127.0.0.1:\(port) HTTP/1.1", ["Host: 127.0.0.1:\(port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 502)
                #expect(response.bodyText.hasPrefix("hookproxy: cannot connect to 127.0.0.1:\(port): "), "\(response.bodyText)")
                #expect(response.bodyText.count > "hookproxy: cannot connect to 127.0.0.1:\(port): ".count + 2, "no reason given")
            }
            // the failure is logged like any exchange: a CONNECT with its 502
            let records = await proxy.recorder.waitFor(count: 1)
            #expect(records.contains { $0.request.method == "CONNECT" && $0.response?.status == 502 },
                    "\(records.map { "\($0.request.method) \($0.response?.status ?? 0)" })")
            let result = try await curlThrough(proxy, ["https://127.0.0.1:\(port)/"])
            #expect(result.exitCode != 0)
            #expect(result.stderr.contains("502"), "curl names the CONNECT failure: \(result.stderr)")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("CONNECT with a target that is not host:port answers 400 with a message")
    func connectBadTarget() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("CONNECT no-port-here HTTP/1.1", ["Host: no-port-here"]))
                let response = try await client.readResponse()
                #expect(response.status == 400)
                #expect(response.bodyText.hasPrefix("hookproxy: bad request: CONNECT target must be host:port"), "\(response.bodyText)")
            }
            try await expectProxyStillServes(proxy, origin)
        }
    }

    // MARK: --proxy-auth

    static let credentials = ProxyCredentials(user: "alice", password: "s3cret:with:colons")

    @Test("--proxy-auth: no credentials → 407 with the Basic challenge; wrong → 407; right → 200")
    func proxyAuth() async throws {
        try await withProxyAndOrigin({ $0.proxyAuth = Self.credentials }) { proxy, origin in
            let target = "http://127.0.0.1:\(origin.port)/headers"
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET \(target) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 407)
                #expect(response.header("Proxy-Authenticate") == "Basic realm=\"hookproxy\"")
                #expect(response.bodyText.hasPrefix("hookproxy: "), "\(response.bodyText)")
            }
            let wrong = try await curlThrough(proxy, ["-U", "alice:wrong", "-o", "/dev/null", "-w", "%{http_code}", target])
            #expect(wrong.stdoutText == "407")
            #expect(origin.acceptedConnections == 0, "a refused client reached the origin")

            let right = try await curlThrough(proxy, ["-U", "alice:s3cret:with:colons", "-H", "X-Visible: yes", target])
            #expect(right.exitCode == 0, "\(right.stderr)")
            #expect(right.stdoutText.contains("X-Visible: yes"))
            let request = try #require(origin.requests.last)
            #expect(request.header("Proxy-Authorization") == nil, "the credentials reached the origin")
            #expect(!right.stdoutText.lowercased().contains("proxy-authorization"))
        }
    }

    @Test("--proxy-auth applies to CONNECT: none → 407; right → tunnel")
    func proxyAuthConnect() async throws {
        try await withTLSOrigin { origin, rootPEM in
            try await withProxy({ $0.proxyAuth = Self.credentials }) { proxy in
                try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                    let response = try await client.readResponse()
                    #expect(response.status == 407)
                    #expect(response.header("Proxy-Authenticate") == "Basic realm=\"hookproxy\"")
                }
                #expect(origin.acceptedConnections == 0, "CONNECT without credentials opened a connection")
                // curl without credentials reads the 407 and stops (it does not hang waiting for a body's end).
                let refused = try await curlThrough(proxy, ["--cacert", rootPEM, "https://127.0.0.1:\(origin.port)/bytes/100"],
                                                    timeout: .seconds(20))
                #expect(!refused.timedOut, "curl hung on the CONNECT 407")
                #expect(refused.exitCode != 0)
                #expect(refused.stderr.contains("407"), "\(refused.stderr)")
                #expect(origin.acceptedConnections == 0)
                let result = try await curlThrough(proxy, ["-U", "alice:s3cret:with:colons", "--cacert", rootPEM,
                                                           "https://127.0.0.1:\(origin.port)/bytes/100"])
                #expect(result.exitCode == 0, "\(result.stderr)")
                #expect(isPattern(result.stdout, count: 100), "\(patternMismatch(result.stdout, count: 100))")
            }
        }
    }
}
