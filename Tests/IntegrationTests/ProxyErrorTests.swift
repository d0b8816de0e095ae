import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 2, "Errors a user sees": every failure answers a readable response, and the proxy keeps serving.
@Suite("Errors a user sees")
struct ProxyErrorTests {
    /// A port on 127.0.0.1 that refuses connections for the life of the suite value (bound, never listening: a
    /// port merely closed could be taken by a test running beside this one).
    let refusing: RefusingPort

    init() throws { refusing = try RefusingPort() }

    func refusedPort() async throws -> Int { refusing.port }

    @Test("a refused upstream port answers 502 naming the target and curl's reason")
    func refused() async throws {
        let port = try await refusedPort()
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(port)/x HTTP/1.1", ["Host: 127.0.0.1:\(port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 502)
                #expect(response.bodyText.hasPrefix("hookproxy: cannot connect to 127.0.0.1:\(port): "), "\(response.bodyText)")
                #expect(response.bodyText.count > "hookproxy: cannot connect to 127.0.0.1:\(port): ".count + 2, "no reason given")
            }
            let records = await proxy.recorder.waitFor(count: 1)
            #expect(records.first?.error?.contains("cannot connect to 127.0.0.1:\(port)") == true,
                    "the log's reason: \(String(describing: records.first?.error))")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    /// A HEAD response has no body (RFC 9110 §9.3.2), hookproxy's own error answer included. Over HTTP/1.1 NIO's
    /// encoder dropped the message and the log counted it as sent; over HTTP/2 it cost the whole connection (see
    /// HTTP2ClientTests.headAnsweredWithAnError).
    @Test("a HEAD answered 502 carries no body, and the connection serves the next request")
    func headAnsweredWithAnError() async throws {
        let port = try await refusedPort()
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("HEAD http://127.0.0.1:\(port)/x HTTP/1.1", ["Host: 127.0.0.1:\(port)"]))
                let refused = try await client.readResponse(method: "HEAD")
                #expect(refused.status == 502)
                try await client.send(rawRequest("GET \(origin.baseURL)/bytes/10 HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                let next = try await client.readResponse()
                #expect(next.status == 200)
                #expect(next.body == pattern(count: 10))
            }
            let records = await proxy.recorder.waitFor(count: 2)
            #expect(records.first?.responseBodySize == 0, "the log counts no body for the HEAD")
        }
    }

    @Test("a DNS failure answers 502 naming the host")
    func dnsFailure() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy, readTimeout: .seconds(30)) { client in
                try await client.send(rawRequest("GET http://no-such-host.invalid/x HTTP/1.1", ["Host: no-such-host.invalid"]))
                let response = try await client.readResponse()
                #expect(response.status == 502)
                #expect(response.bodyText.hasPrefix("hookproxy: DNS failure no-such-host.invalid"), "\(response.bodyText)")
            }
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("an origin that never answers gets 504 after the idle timeout")
    func idleTimeout() async throws {
        try await withProxyAndOrigin({ $0.upstream.idleTimeoutMs = 1000 }) { proxy, origin in
            try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/hang HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 504)
                #expect(response.bodyText.hasPrefix("hookproxy: timeout waiting for 127.0.0.1:\(origin.port): "), "\(response.bodyText)")
            }
            // The 1 s idle timeout holds for this request too: on a loaded machine the origin (on the tests' shared
            // event loops) can be silent that long and earn a 504 of its own, so the proxy must serve within a few
            // tries, not at the first.
            var served = false
            for _ in 0..<5 where !served {
                served = (try? await curlThrough(proxy, ["\(origin.baseURL)/bytes/1000"]))?.stdout == pattern(count: 1000)
            }
            #expect(served, "the proxy no longer serves after the 504")
        }
    }

    /// A review's find: curl's low-speed check averages over seconds, from the transfer's start, so an upload that
    /// went out before the silence kept the speed "up": a 2 KB POST to a silent origin got its 504 after 8 s with
    /// `--idle-timeout 2`. The proxy now times the silence itself.
    @Test("an origin that takes a 2 KB POST and then says nothing gets 504 at the idle timeout, not seconds later")
    func idleTimeoutAfterAnUpload() async throws {
        try await MisbehavingOrigin.with([.hang]) { origin in
            try await withProxy({ $0.upstream.idleTimeoutMs = 2000 }) { proxy in
                try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    let start = ContinuousClock.now
                    try await client.send(rawRequest("POST \(origin.baseURL)/upload HTTP/1.1",
                                                     ["Host: 127.0.0.1:\(origin.port)", "Content-Length: 2000"],
                                                     body: String(repeating: "x", count: 2000)))
                    let response = try await client.readResponse(method: "POST")
                    let took = ContinuousClock.now - start
                    #expect(response.status == 504, "\(response.rawHead)")
                    #expect(response.bodyText.hasPrefix("hookproxy: timeout waiting for 127.0.0.1:\(origin.port): "), "\(response.bodyText)")
                    // curl checks about once a second: 2–3 s, with room for a loaded machine (the old way: 8 s).
                    #expect(took >= .milliseconds(1900) && took < .milliseconds(5500), "504 after \(took)")
                }
            }
        }
    }

    /// A review's find: curl's low-speed check, left at the idle timeout beside the transfer's own clock, cut an
    /// upstream that sent a byte every 1.2 s (under 1 byte/s on average) at 2 s, however recent its last byte.
    @Test("an origin that trickles a byte more often than the idle timeout is never cut")
    func tricklingOriginIsNotIdle() async throws {
        let script: [MisbehavingOrigin.Step] = [
            .text("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"), .drip(Array("abcd".utf8), intervalMilliseconds: 1200),
        ]
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy({ $0.upstream.idleTimeoutMs = 2000; $0.limits.clientIdleTimeoutMs = 2000 }) { proxy in
                try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    try await client.send(rawRequest("GET \(origin.baseURL)/drip HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                    let response = try await client.readResponse()
                    #expect(response.status == 200 && response.bodyText == "abcd", "\(response.rawHead)\(response.bodyText)")
                }
            }
        }
    }

    /// Inputs the parser rejects: each gets 400 and a closed connection; the origin never hears of them.
    static let badRequests: [(String, String)] = [
        ("malformed request line", "GARBAGE\r\n\r\n"),
        ("missing version", "GET http://127.0.0.1:PORT/echo\r\n\r\n"),
        ("Content-Length with Transfer-Encoding",
         "POST http://127.0.0.1:PORT/echo HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        ("invalid Content-Length",
         "POST http://127.0.0.1:PORT/echo HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 12abc\r\n\r\nhello"),
        ("two different Content-Lengths",
         "POST http://127.0.0.1:PORT/echo HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ("header without a colon", "GET http://127.0.0.1:PORT/echo HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nNoColonHere\r\n\r\n"),
        ("origin-form without Host", "GET /echo HTTP/1.1\r\nX-A: 1\r\n\r\n"),
    ]

    @Test("a bad request gets 400 with a message and a closed connection; nothing reaches the origin",
          arguments: badRequests.indices)
    func badRequest(_ index: Int) async throws {
        let (name, template) = Self.badRequests[index]
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(template.replacingOccurrences(of: "PORT", with: String(origin.port)))
                let response = try await client.readResponse()
                #expect(response.status == 400, "\(name): \(response.rawHead)")
                #expect(response.bodyText.hasPrefix("hookproxy: bad request"), "\(name): \(response.bodyText)")
                #expect(await client.waitForClose(), "\(name): the connection stays open after a 400")
            }
            #expect(!origin.receivedAnyRequestBytes, "\(name): the origin received bytes")
            #expect(origin.acceptedConnections == 0, "\(name): the proxy connected to the origin")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("headers over --max-header-bytes answer 431; the proxy still serves")
    func headersTooLarge() async throws {
        try await withProxyAndOrigin({ $0.limits.maxHeaderBytes = 4096 }) { proxy, origin in
            try await withRawClient(proxy) { client in
                let big = String(repeating: "v", count: 8000)
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/echo HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)", "X-Big: \(big)"]))
                let response = try await client.readResponse()
                #expect(response.status == 431)
                #expect(response.bodyText.hasPrefix("hookproxy: request headers exceed 4096 bytes"), "\(response.bodyText)")
            }
            try await withRawClient(proxy) { client in
                // Many small headers over the limit in total.
                let many = (0..<200).map { "X-Header-\($0): \(String(repeating: "x", count: 40))" }
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/echo HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"] + many))
                let response = try await client.readResponse()
                #expect(response.status == 431)
            }
            #expect(!origin.receivedAnyRequestBytes)
            // Just under the limit is fine.
            let header = "X-Fits: " + String(repeating: "f", count: 2000)
            let result = try await curlThrough(proxy, ["-H", header, "\(origin.baseURL)/bytes/10"])
            #expect(result.exitCode == 0 && result.stdout == pattern(count: 10), "\(result.stderr)")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("with --max-connections 2 a third concurrent connection gets 503; later ones are served again")
    func tooManyConnections() async throws {
        try await withProxyAndOrigin({ $0.limits.maxConnections = 2 }) { proxy, origin in
            let host = "Host: 127.0.0.1:\(origin.port)"
            let get = rawRequest("GET http://127.0.0.1:\(origin.port)/bytes/10 HTTP/1.1", [host])
            let first = try await RawClient.connect(port: proxy.port)
            defer { first.close() }
            let second = try await RawClient.connect(port: proxy.port)
            defer { second.close() }
            // Both admitted and held open (keep-alive).
            for client in [first, second] {
                try await client.send(get)
                #expect(try await client.readResponse().status == 200)
            }
            try await withRawClient(proxy) { third in
                let response = try await third.readResponse()
                #expect(response.status == 503)
                #expect(response.bodyText.hasPrefix("hookproxy: too many connections"), "\(response.bodyText)")
                #expect(await third.waitForClose())
            }
            first.close()
            // Once a slot is free (the proxy notices the close), a new connection is served.
            var served = false
            for _ in 0..<50 where !served {
                let client = try await RawClient.connect(port: proxy.port)
                defer { client.close() }
                try await client.send(get)
                if let response = try? await client.readResponse(), response.status == 200 { served = true }
                else { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(served, "no connection was served after one closed")
        }
    }

    @Test("a request to the proxy's own address gets the onboarding page, not a loop")
    func ownAddress() async throws {
        try await withProxy { proxy in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(proxy.port)/ HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.header("content-type")?.hasPrefix("text/html") == true)
                #expect(response.bodyText.contains("hookproxy"))
                #expect(response.bodyText.contains("/ca.pem"))
                // Origin-form to the proxy itself (a browser pointed at it) too.
                try await client.send(rawRequest("GET / HTTP/1.1", ["Host: localhost:\(proxy.port)"]))
                let direct = try await client.readResponse()
                #expect(direct.status == 200)
                #expect(direct.bodyText.contains("hookproxy"))
            }
            let records = await proxy.recorder.waitFor(count: 2, timeout: .seconds(2))
            #expect(records.count == 2, "one record per request, not a forwarding loop: \(records.count)")
        }
    }
}
