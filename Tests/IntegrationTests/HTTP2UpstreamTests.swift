import Foundation
import NIOCore
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 16, upstream side: libcurl negotiates HTTP/2 with TLS origins that offer it (`CURL_HTTP_VERSION_2TLS`),
/// multiplexes a loop's requests to one origin and trust policy on one connection, and `--upstream-http1` turns
/// it off. The origin is `TestH2Origin` (swift-nio-http2, ALPN h2 and http/1.1), trusted through a `trust` rule.
@Suite("HTTP/2 upstreams (issue 16)", .timeLimit(.minutes(3)))
struct HTTP2UpstreamTests {
    static let ca = TestCA.shared
    static var identity: TestTLSIdentity { ca.identity([ca.leaf, ca.intermediate]) }

    @Test("an HTTP/1.1 client's request reaches an h2 origin over HTTP/2; the log keeps both versions")
    func h2Upstream() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/hello",
                                                    ["--http1.1", "--cacert", caPath, "-H", "X-Client: kept"])
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.status == 200)
                #expect(response.bodyText == "hello over h2\n")
                let request = try #require(origin.requests.first)
                #expect(request.version == "HTTP/2")
                #expect(request.header("x-client") == "kept")
                #expect(request.header(":authority") == "localhost:\(origin.port)")
                let records = await Hooks.records(proxy)
                #expect(records.first?.request.version == .http1_1, "the client side's version")
                #expect(records.first?.response?.version == .http2, "the upstream's version")
            }
        }
    }

    @Test("concurrent streams to one origin under one trust policy share one upstream HTTP/2 connection")
    func multiplexed() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy { proxy, _ in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                var streams: [StreamCollector] = []
                for _ in 0..<20 { streams.append(try await client.open("GET", "/held?key=all")) }
                #expect(await eventually(timeout: .seconds(15)) { origin.requests.count == 20 },
                        "all 20 are in flight at once upstream: \(origin.requests.count)")
                origin.release("all")
                for stream in streams {
                    let response = try await stream.response()
                    #expect(response.status == 200)
                    #expect(response.text == "released\n")
                }
                #expect(origin.acceptedConnections == 1, "one connection, multiplexed")
                #expect(Set(origin.requests.map(\.connection)).count == 1)
                let records = await Hooks.records(proxy, count: 20)
                // Only the flow whose handshake verified the chain saw it; the others say whose verification they reused.
                let trust = records.flatMap(\.events).filter { $0.hook == .trust }
                #expect(trust.count == 20 && trust.allSatisfy { $0.action == "trust accepted" }, "\(trust.map(\.logText))")
            }
        }
    }

    /// An HTTP/2 client through an intercepting proxy to a `TestH2Origin`.
    private func withTunnelClient(_ body: (H2TunnelClient, TestH2Origin) async throws -> Void) async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy { proxy, _ in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                try await body(client, origin)
            }
        }
    }

    /// libcurl 7.88 queues a removed HTTP/2 transfer's RST_STREAM and writes it with the connection's next frame, so
    /// a cancel reached the origin only when another request used that connection (a hostile review's gRPC
    /// cancels never did in 6 s). A cancelled transfer alone on its connection now closes it.
    @Test("a client that gives up on a request carried alone over HTTP/2: the origin sees the cancel at once")
    func cancelReachesTheOrigin() async throws {
        try await withTunnelClient { client, origin in
            let held = try await client.open("GET", "/held?key=never")
            #expect(await eventually(timeout: .seconds(15)) { origin.requests.count == 1 })
            held.reset()
            #expect(await eventually(timeout: .seconds(5)) { origin.abandonedRequests == 1 },
                    "the origin still waits to answer a request nobody wants")
            // The next request gets a new connection and its answer.
            let next = try await client.send("GET", "/hello")
            #expect(next.status == 200 && next.text == "hello over h2\n", "\(next)")
        }
    }

    @Test("a cancel beside another stream on the same upstream connection leaves that connection and stream alone")
    func cancelBesideAnotherStream() async throws {
        try await withTunnelClient { client, origin in
            let given = try await client.open("GET", "/held?key=a")
            let kept = try await client.open("GET", "/held?key=b")
            #expect(await eventually(timeout: .seconds(15)) { origin.requests.count == 2 })
            given.reset()
            try await Task.sleep(for: .milliseconds(300))
            origin.release("b")
            let answer = try await kept.response()
            #expect(answer.status == 200 && answer.text == "released\n", "\(answer)")
            #expect(origin.acceptedConnections == 1)
        }
    }

    /// libcurl 7.88 asks to write an HTTP/2 connection while one stream's send window is shut, and the socket is
    /// always writable: the engine's poll found work on every turn and queued itself again, and NIO runs a task
    /// queued by a task before it looks at any socket, so the loop read none of its clients until the upload timed
    /// out (a hostile review: the next stream waited 13.5 s, another client 10.6 s).
    @Test("an upload the origin stops reading leaves the other streams to that origin moving")
    func stalledUploadLeavesOthersMoving() async throws {
        try await withTunnelClient { client, origin in
            let upload = try await client.open("POST", "/stall", body: [UInt8](repeating: 0x73, count: 400 * 1024))
            #expect(await eventually(timeout: .seconds(15)) { origin.requests.contains { $0.path == "/stall" } })
            try await Task.sleep(for: .milliseconds(300))  // its first 64 KiB are in; the rest waits on the window
            let other = try await client.send("GET", "/hello", timeout: .seconds(8))
            #expect(other.status == 200 && other.text == "hello over h2\n", "\(other)")
            upload.reset()
        }
    }

    @Test("--upstream-http1: the same origin is asked over HTTP/1.1")
    func upstreamHTTP1() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy({ $0.upstream.http2 = false }) { proxy, caPath in
                let response = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/hello", ["--cacert", caPath])
                #expect(response.exitCode == 0, "\(response.stderr)")
                #expect(response.bodyText == "hello over HTTP/1.1\n")
                #expect(origin.requests.map(\.version) == ["HTTP/1.1"])
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.version == .http1_1)
            }
        }
    }

    @Test("hookproxy run --upstream-http1 (the binary): HTTP/1.1 upstream; without it, HTTP/2")
    func flagOnTheBinary() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            for (flag, expected) in [(["--upstream-http1"], "hello over HTTP/1.1\n"), ([], "hello over h2\n")] {
                let directory = try TemporaryDirectory()
                let root = try directory.writePEM([TestCA.shared.root], to: "R.pem")
                _ = try directory.write("rules:\n  - name: trust-test-root\n    match: { host: localhost }\n    trust: { ca_file: \(root) }\n",
                                        to: "rules/rules.yaml")
                try await withRunningHookproxy(flag + ["--intercept", "localhost", "--ca-dir", directory.path + "/ca",
                                                       "--rules", directory.path + "/rules"], in: directory) { running in
                    let result = try await CurlCLI.run(["-s", "-S", "--max-time", "20", "-x", running.proxyURL,
                                                        "--cacert", directory.path + "/ca/hookproxy-ca.pem",
                                                        "https://localhost:\(origin.port)/hello"], timeout: .seconds(30))
                    #expect(result.exitCode == 0, "\(result.stderr)")
                    #expect(result.stdoutText == expected, "\(flag)")
                }
            }
        }
    }

    @Test("trailers: an h2 origin's trailers reach an h2 client, and an HTTP/1.1 client that sent TE: trailers")
    func trailers() async throws {
        try await TestH2Origin.with(tls: Self.identity) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let client = try await H2TunnelClient.connect(
                    proxyPort: proxy.port, port: origin.port, trustRoots: [try proxy.server.certificateAuthority().certificate])
                defer { Task { await client.close() } }
                let h2 = try await client.send("GET", "/trailers", headers: [("te", "trailers")])
                #expect(h2.status == 200)
                #expect(h2.text == "body\n")
                #expect(h2.trailer("x-checksum") == "1234", "\(String(describing: h2.trailers))")
                #expect(h2.trailer("grpc-status") == "0")
                #expect(origin.requests.last?.header("te") == "trailers", "TE: trailers is forwarded")

                let raw = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/trailers",
                                               ["--http1.1", "--raw", "--cacert", caPath, "-H", "TE: trailers"])
                #expect(raw.exitCode == 0, "\(raw.stderr)")
                #expect(raw.header("Transfer-Encoding")?.lowercased() == "chunked", "\(raw.headers)")
                #expect(raw.bodyText.hasSuffix("\r\n0\r\nx-checksum: 1234\r\ngrpc-status: 0\r\n\r\n"), "\(raw.bodyText)")
                #expect(origin.requests.last?.header("te") == "trailers")

                let without = try await Hooks.curl(proxy, "https://localhost:\(origin.port)/trailers",
                                                   ["--http1.1", "--raw", "--cacert", caPath])
                #expect(without.status == 200)
                #expect(!without.bodyText.contains("x-checksum"), "no TE: trailers, no trailers")
                #expect(origin.requests.last?.header("te") == nil)
            }
        }
    }
}
