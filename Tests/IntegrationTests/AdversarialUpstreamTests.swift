import Foundation
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 12, item 3: the proxy against an upstream that misbehaves on purpose (`MisbehavingOrigin`), beyond the
/// framing and early-close cases of HardeningTests: folded and endless headers, status lines that are not HTTP, a
/// byte-at-a-time drip, and the same faults inside an intercepted TLS tunnel.
@Suite("adversarial upstream (issue 12)", .timeLimit(.minutes(3)))
struct AdversarialUpstreamTests {
    func get(_ proxy: ProxyHarness, _ origin: MisbehavingOrigin) async throws -> RawClient.Response {
        try await withRawClient(proxy, readTimeout: .seconds(30)) { client in
            try await client.send(rawRequest("GET \(origin.baseURL)/x HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
            return try await client.readResponse()
        }
    }

    /// A hostile tester's find: curl 7.88 takes a cached connection with bytes waiting as alive, so a response
    /// sent after a 204 (a server's bug, or a hostile one) became the answer to the next request on it, which came
    /// from another client, and every later answer on that connection was one off.
    @Test("bytes an upstream sends on an idle keep-alive connection never answer the next client's request",
          arguments: ["HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n",
                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
    func unsolicitedBytesOnAnIdleConnection(_ answer: String) async throws {
        let forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Forged: 1\r\n\r\nPOISON"
        let script: [MisbehavingOrigin.Step] = [.text(answer), .pause(milliseconds: 50), .text(forged)]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                #expect(try await get(proxy, origin).header("X-Forged") == nil)
                try await Task.sleep(for: .seconds(1))  // the forged response is out 50 ms after the answer
                for _ in 0..<2 {
                    let next = try await get(proxy, origin)
                    #expect(next.header("X-Forged") == nil && next.bodyText != "POISON", "\(next.rawHead)\(next.bodyText)")
                    try await Task.sleep(for: .milliseconds(300))
                }
            }
        }
    }

    @Test("an obs-folded header reaches the client unfolded, on one line")
    func obsFold() async throws {
        let script: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\nX-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\nok")]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let response = try await get(proxy, origin)
                #expect(response.status == 200)
                #expect(response.header("X-Folded") == "a b", "\(response.rawHead)")
                #expect(!response.rawHead.contains("\r\n "), "a folded line was forwarded: \(response.rawHead)")
                #expect(response.bodyText == "ok")
            }
        }
    }

    @Test("a status line that is not HTTP gets 502 naming the host", arguments: ["SSH-2.0-OpenSSH_9.2\r\n", "HTTP/1.1 abc Weird\r\n\r\n", "\0\0\0\0\r\n\r\n",
                     "HTTP/2 -1 Neg\r\nContent-Length: 0\r\n\r\n"])
    func notHTTP(_ line: String) async throws {
        try await MisbehavingOrigin.with([.text(line), .close]) { origin in
            try await withProxy { proxy in
                let response = try await get(proxy, origin)
                #expect(response.status == 502, "\(response.rawHead)")
                #expect(response.bodyText.contains("127.0.0.1:\(origin.port)"), "\(response.bodyText)")
            }
        }
    }

    @Test("an endless response header gets 502, and the proxy keeps serving")
    func endlessHeader() async throws {
        let script: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\nX-Endless: "),
                                                .send([UInt8](repeating: 0x61, count: 2 << 20)), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxyAndOrigin { proxy, good in
                let response = try await get(proxy, origin)
                #expect(response.status == 502, "\(response.rawHead)")
                try await expectProxyStillServes(proxy, good)
            }
        }
    }

    @Test("a malformed chunked body is logged as a bad response, not as a closed connection",
          arguments: ["zz\r\nhello\r\n0\r\n\r\n",
                      "5\r\nhello\r\n0\r\nX-Long: " + String(repeating: "a", count: 9000) + "\r\n\r\n"])
    func malformedChunkedBody(_ chunks: String) async throws {
        let script: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks), .hang]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                _ = try? await get(proxy, origin)  // the head may be out before the body fails: the client sees a cut
                let record = try #require(await Hooks.records(proxy).first)
                let error = try #require(record.error)
                #expect(error.hasPrefix("hookproxy: bad response from 127.0.0.1:\(origin.port): its chunked body"), "\(error)")
                #expect(!error.contains("closed the connection"), "\(error)")
            }
        }
    }

    @Test("a head past libcurl's limits gets 502 saying the response was too large, not out of memory or closed",
          arguments: [("X-Big: " + String(repeating: "a", count: 200_000) + "\r\n", "header line is longer"),
                      ((0..<400).map { "X-H\($0): " + String(repeating: "a", count: 1000) + "\r\n" }.joined(), "head is larger")])
    func headPastCurlLimits(_ fields: String, _ words: String) async throws {
        let script: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\n" + fields + "Content-Length: 2\r\n\r\nok"), .close]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let response = try await get(proxy, origin)
                #expect(response.status == 502, "\(response.rawHead)")
                #expect(response.bodyText.hasPrefix("hookproxy: bad response from 127.0.0.1:\(origin.port): "), "\(response.bodyText)")
                #expect(response.bodyText.contains(words), "\(response.bodyText)")
            }
        }
    }

    @Test("a response dripped one byte at a time arrives whole and correctly framed")
    func drip() async throws {
        let bytes = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Slow: yes\r\n\r\nhello".utf8)
        try await MisbehavingOrigin.with([.drip(bytes, intervalMilliseconds: 15)]) { origin in
            try await withProxy { proxy in
                let response = try await get(proxy, origin)
                #expect(response.status == 200)
                #expect(response.header("X-Slow") == "yes")
                #expect(response.bodyText == "hello")
            }
        }
    }

    // MARK: the same faults inside an intercepted TLS tunnel

    /// A TLS MisbehavingOrigin (leaf L for localhost, under the test root), hookproxy intercepting localhost and
    /// trusting the test root; curl trusts hookproxy's CA.
    func intercepted(_ script: [MisbehavingOrigin.Step],
                     _ body: (MisbehavingOrigin, ProxyHarness, String) async throws -> Void) async throws {
        let ca = TestCA.shared
        try await MisbehavingOrigin.with(script, tls: ca.identity([ca.leaf, ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, caPath in try await body(origin, proxy, caPath) }
        }
    }

    @Test("intercepted: Content-Length 0 with chunked is re-framed, conflicting lengths and a bare CR get 502",
          arguments: [("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, "hello"),
                      ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 502, "hookproxy: "),
                      ("HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 2\r\n\r\nok", 502, "hookproxy: ")])
    func interceptedFraming(_ raw: String, _ status: Int, _ bodyPrefix: String) async throws {
        try await intercepted([.text(raw)]) { origin, proxy, caPath in
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/x", ["--cacert", caPath])
            #expect(response.status == status, "\(response.stderr)")
            #expect(response.bodyText.hasPrefix(bodyPrefix), "\(response.bodyText)")
        }
    }

    @Test("intercepted: an origin that dies mid-body gives the client the bytes that arrived, then an incomplete end")
    func interceptedMidBody() async throws {
        let body = [UInt8](repeating: 0x63, count: 1000)
        try await intercepted([.text("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"), .send(body), .close]) { origin, proxy, caPath in
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/x", ["--cacert", caPath])
            #expect(response.status == 200)
            // partial file / recv error (HTTP/1.1), or the stream reset (HTTP/2, curl's default through the tunnel)
            #expect([18, 56, 92].contains(response.exitCode), "curl: \(response.exitCode) \(response.stderr)")
            #expect(response.body == body)
        }
    }

    @Test("intercepted: a reset before the head gets 502")
    func interceptedReset() async throws {
        try await intercepted([.reset]) { origin, proxy, caPath in
            let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/x", ["--cacert", caPath])
            #expect(response.status == 502, "\(response.stderr)")
        }
    }
}
