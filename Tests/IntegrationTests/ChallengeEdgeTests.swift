import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// `on_challenge: use_credential` against servers that never stop asking.
@Suite("on_challenge: hostile challenges", .timeLimit(.minutes(2)))
struct ChallengeEdgeTests {
    @Test("a server that marks its Digest nonce stale on every answer gets a few rounds, not thousands")
    func staleDigestForever() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let rules = try Hooks.store(directory, ChallengeHookTests.useCredential())
            try await withHookProxy(rules: rules) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/auth/digest?user=a&pass=b&stale=1")
                // The first request and 4 answers (CurlTransfer.maxAuthRounds); libcurl alone sent over a thousand.
                #expect(origin.requests.count <= 5, "\(origin.requests.count) requests")
                #expect(response.status == 502)
                #expect(response.bodyText.contains("challenge failed"), "\(response.bodyText.prefix(300))")
                #expect(response.bodyText.contains("asked for credentials again"))
            }
        }
    }

    @Test("a 401 whose body never ends, under use_credential: a 502 that says so, not a request held forever")
    func endlessChallengeBody() async throws {
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 0x10000) + Array("\r\n".utf8)
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"r\"\r\nTransfer-Encoding: chunked\r\n\r\n"),
            .send(Array([[UInt8]](repeating: chunk, count: 24).joined())),
            .hang,
        ]
        try await MisbehavingOrigin.with(script) { origin in
            let directory = try TemporaryDirectory()
            let rules = try Hooks.store(directory, ChallengeHookTests.useCredential())
            try await withHookProxy(rules: rules) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/endless", ["--max-time", "10"])
                #expect(response.status == 502, "\(response.stderr)")
                #expect(response.bodyText.contains("challenge failed"), "\(response.bodyText.prefix(300))")
            }
        }
    }

    /// A review's find: the idle timeout struck while curl's credentialed round waited, and the client got the
    /// first round's 401, which the rule had said to answer.
    @Test("a server silent after its 401, under use_credential: the client gets the idle timeout's 504, not the 401")
    func silentAfterTheChallenge() async throws {
        // The origin reads the credentialed retry only after this pause: to curl, that round is silent.
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"r\"\r\nContent-Length: 0\r\n\r\n"),
            .pause(milliseconds: 8000),
        ]
        try await MisbehavingOrigin.with(script) { origin in
            let directory = try TemporaryDirectory()
            let rules = try Hooks.store(directory, ChallengeHookTests.useCredential())
            try await withHookProxy(rules: rules, { $0.upstream.idleTimeoutMs = 1500 }) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/silent", ["--max-time", "10"])
                #expect(response.status == 504, "\(response.stderr) \(response.bodyText.prefix(200))")
                #expect(response.bodyText.contains("timeout waiting for"), "\(response.bodyText.prefix(300))")
            }
        }
    }

    @Test("an upstream proxy's 407 whose body never ends: a CONNECT is answered within --connect-timeout")
    func endlessProxyChallengeBodyOnConnect() async throws {
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 0x10000) + Array("\r\n".utf8)
        // 60 s of 407 body, 64 KiB every 10 ms.
        let endless = [[MisbehavingOrigin.Step]](repeating: [.send(chunk), .pause(milliseconds: 10)], count: 6000).flatMap { $0 }
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\"\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ] + endless
        try await MisbehavingOrigin.with(script) { upstream in
            let url = "http://u:p@127.0.0.1:\(upstream.port)"
            try await withHookProxy(rules: nil, {
                $0.upstream.upstreamProxy = url
                $0.upstream.connectTimeoutMs = 1_000
            }) { proxy in
                let started = ContinuousClock.now
                let response = try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    try await client.send(rawRequest("CONNECT example.invalid:443 HTTP/1.1", ["Host: example.invalid:443"]))
                    return try await client.readResponse(method: "CONNECT")
                }
                let took = ContinuousClock.now - started
                #expect(response.status == 502 || response.status == 504, "\(response.rawHead)")
                #expect(took < .seconds(8), "the CONNECT was answered after \(took)")
            }
        }
    }
}

