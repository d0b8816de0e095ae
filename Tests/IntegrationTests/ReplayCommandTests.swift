import Foundation
import ProxyTestSupport
import Testing

/// Issue 18, item 2: `hookproxy replay FILE.har` as a user runs it (the built binary, in a temporary directory that
/// is also its HOME), against a TestOrigin, with HAR files that hookproxy itself recorded.
@Suite("Replay: the command line (issue 18: 2)", .timeLimit(.minutes(3)))
struct ReplayCommandTests {
    static let testCA = TestCA.shared

    @Test("a HAR hookproxy recorded replays unchanged: exit 0, one line per request, a followed redirect sent once, the POST body byte-exact, --har OUT valid")
    func recordAndReplay() async throws {
        let directory = try TemporaryDirectory()
        let recorded = directory.path + "/recorded.har", replayed = directory.path + "/replayed.har"
        let rules = """
            rules:
              - name: follow
                match: { path: "/redirect-chain/*" }
                on_redirect: { action: follow }

            """
        let body = (0..<3000).map { UInt8(($0 * 7) % 256) }  // not UTF-8: the HAR holds it as base64
        let bodyFile = try directory.write(body, to: "body.bin")
        try await withOrigin { origin in
            try await Replay.record(to: recorded, rules: rules, in: directory) { proxy async throws in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/head-test").status == 200)
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/sha256", [
                    "--data-binary", "@\(bodyFile)", "-H", "Content-Type: application/octet-stream"]).status == 200)
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/redirect-chain/2").status == 200)
            }
            #expect(LogFiles.harEntries(recorded)?.count == 5, "3 requests, the redirect as 3 hops")
            let before = origin.requests.count

            let run = try await Replay.run([recorded, "--rules", directory.path + "/rules", "--har", replayed], in: directory)
            #expect(run.status == 0, "stdout: \(run.lines) stderr: \(run.stderr)")
            let base = origin.baseURL
            #expect(run.requestLines == [
                "200       15 B → 200       15 B  GET \(base)/head-test",
                "200       69 B → 200       69 B  POST \(base)/sha256",
                "200       11 B → 200       11 B  GET \(base)/redirect-chain/2",
            ], "\(run.lines)")
            #expect(run.summary == "3 requests, 0 status changes, 0 failures")

            let sent = Array(origin.requests.dropFirst(before))
            #expect(sent.map(\.target) == ["/head-test", "/sha256", "/redirect-chain/2", "/redirect-chain/1", "/redirect-chain/0"])
            let post = try #require(sent.first { $0.target == "/sha256" })
            #expect(post.body == body, "the replayed body differs (\(post.body.count) bytes)")
            #expect(post.header("Content-Length") == "3000")
            #expect(post.header("Content-Type") == "application/octet-stream")

            let entries = try await LogFiles.checkHAR(replayed, directory: directory)
            #expect(entries.count == 5, "\(entries)")
        }
    }

    @Test("a rule that answers 503 on replay: the line says status changed, the summary counts it, exit 1")
    func statusChangedByRule() async throws {
        let directory = try TemporaryDirectory()
        let recorded = directory.path + "/recorded.har"
        try await withOrigin { origin in
            try await Replay.record(to: recorded, in: directory) { proxy async throws in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/head-test").status == 200)
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/bytes/10").status == 200)
            }
            try directory.write("""
                rules:
                  - name: down
                    match: { path: /head-test }
                    respond: { status: 503, body: "maintenance\\n" }

                """, to: "replay-rules/down.yaml")
            let before = origin.requests.count
            let run = try await Replay.run([recorded, "--rules", directory.path + "/replay-rules"], in: directory)
            #expect(run.status == 1, "stdout: \(run.lines) stderr: \(run.stderr)")
            #expect(run.requestLines == [
                "200       15 B → 503       12 B  GET \(origin.baseURL)/head-test  status changed, size changed",
                "200       10 B → 200       10 B  GET \(origin.baseURL)/bytes/10",
            ], "\(run.lines)")
            #expect(run.summary == "2 requests, 1 status change, 1 size change, 0 failures")
            #expect(origin.requests.dropFirst(before).map(\.target) == ["/bytes/10"], "the rule answered /head-test")

            let only = try await Replay.run([recorded, "--rules", directory.path + "/replay-rules", "--only", "*/bytes/*"],
                                            in: directory)
            #expect(only.status == 0, "stdout: \(only.lines) stderr: \(only.stderr)")
            #expect(only.requestLines == ["200       10 B → 200       10 B  GET \(origin.baseURL)/bytes/10"], "\(only.lines)")
            #expect(only.summary == "1 request, 0 status changes, 0 failures")
        }
    }

    @Test("OPTIONS * recorded (its URL without a path) replays as OPTIONS *, not OPTIONS /")
    func asteriskReplaysAsAnAsterisk() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let recorded = directory.path + "/recorded.har"
        try await withOrigin { origin in
            try await Replay.record(to: recorded, in: directory) { proxy async throws in
                let curl = try await curlThrough(proxy, ["-X", "OPTIONS", "--request-target", "*", "-o", "/dev/null", "\(origin.baseURL)/"])
                #expect(curl.exitCode == 0, "\(curl.stderr)")
            }
            let run = try await Replay.run([recorded], in: directory)
            #expect(run.status == 0, "stdout: \(run.lines) stderr: \(run.stderr)")
            #expect(run.requestLines.count == 1 && run.requestLines.first?.hasSuffix("OPTIONS \(origin.baseURL)") == true, "\(run.lines)")
            #expect(origin.requests.map(\.target) == ["*", "*"], "\(origin.requests.map(\.target))")
        }
    }

    @Test("--concurrency 2: two requests in flight, the third starts when one ends, the output stays in HAR order")
    func concurrency() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let har = Replay.har(["a", "b", "c"].map { ("GET", "\(origin.baseURL)/held?key=\($0)", 200, 10, nil) })
            let path = try directory.write(har, to: "held.har")
            let cli = try Replay.start([path, "--concurrency", "2"], in: directory)
            defer { cli.kill() }
            let two = await eventually(timeout: .seconds(20)) { origin.requests.count >= 2 }
            #expect(two, "stderr: \(cli.stderrText)")
            #expect(Set(origin.requests.map(\.target)) == ["/held?key=a", "/held?key=b"], "\(origin.requests.map(\.target))")
            origin.release("b")
            let third = await eventually(timeout: .seconds(20)) { origin.requests.count == 3 }
            #expect(third && origin.requests.last?.target == "/held?key=c")
            #expect(cli.stdoutLines.isEmpty, "b ended first, but a is printed first: \(cli.stdoutLines)")
            origin.release("c")
            origin.release("a")
            let status = await cli.waitForExit(timeout: .seconds(30))
            #expect(status == 0, "stdout: \(cli.stdoutLines) stderr: \(cli.stderrText)")
            #expect(cli.stdoutLines.dropLast().map { $0.components(separatedBy: "key=").last ?? "" } == ["a", "b", "c"],
                    "\(cli.stdoutLines)")
            #expect(origin.requests.allSatisfy { $0.header("X-Replayed") == "yes" })
        }
    }

    @Test("--concurrency far above the entry count (up to Int.max): each entry is sent once and the run ends at once")
    func hugeConcurrency() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let path = try directory.write(Replay.har([("GET", "\(origin.baseURL)/head-test", 200, 15, nil),
                                                       ("GET", "\(origin.baseURL)/bytes/10", 200, 10, nil)]), to: "two.har")
            for concurrency in ["100000000000", String(Int.max)] {
                let before = origin.requests.count
                // (before the fix: one loop turn per unit of concurrency, seconds of CPU for 1e11, Int.max never ends)
                let run = try await Replay.run([path, "--concurrency", concurrency], in: directory, timeout: .seconds(20))
                #expect(run.status == 0, "--concurrency \(concurrency): stdout: \(run.lines) stderr: \(run.stderr)")
                #expect(run.summary == "2 requests, 0 status changes, 0 failures", "\(run.lines)")
                #expect(origin.requests.dropFirst(before).map(\.target).sorted() == ["/bytes/10", "/head-test"])
            }
        }
    }

    /// The in-process proxy kept the default --max-connections (1024): a review's 5000 entries at --concurrency 5000
    /// got 1604 of its own requests refused ("too many connections").
    @Test("--concurrency above 1024: the replay's own proxy admits every request it sends at once")
    func concurrencyAboveTheConnectionLimit() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let count = 1200
            let entries = (0..<count).map { index in ("GET", "\(origin.baseURL)/bytes/10?n=\(index)", 200, 10, String?.none) }
            let path = try directory.write(Replay.har(entries), to: "many.har")
            let run = try await Replay.run([path, "--concurrency", "\(count)"], in: directory, timeout: .seconds(120))
            #expect(run.summary == "\(count) requests, 0 status changes, 0 failures",
                    "\(run.lines.filter { !$0.contains(" 200 ") }.prefix(5)) \(run.stderr)")
            #expect(run.status == 0)
        }
    }

    @Test("a request that cannot be sent shows the proxy's 502 and its reason, and counts as a failure")
    func unreachable() async throws {
        let directory = try TemporaryDirectory()
        let refusing = try RefusingPort()
        let url = "http://127.0.0.1:\(refusing.port)/gone"
        let path = try directory.write(Replay.har([("POST", url, 200, 4, "data")]), to: "gone.har")
        let run = try await Replay.run([path], in: directory)
        #expect(run.status == 1, "stdout: \(run.lines) stderr: \(run.stderr)")
        let line = try #require(run.requestLines.first, "\(run.lines)")
        #expect(line.hasPrefix("200        4 B → 502 "), "\(line)")
        #expect(line.contains("POST \(url)  status changed, failed: hookproxy: cannot connect to 127.0.0.1:\(refusing.port): "), "\(line)")
        #expect(run.summary == "1 request, 1 status change, 1 failure")
    }

    @Test("an upstream that never answers: --timeout 1s gives the proxy's 504, a failure")
    func silentUpstream() async throws {
        let directory = try TemporaryDirectory()
        try await withOrigin { origin in
            let url = "\(origin.baseURL)/hang"
            let path = try directory.write(Replay.har([("GET", url, 200, 1, nil)]), to: "hang.har")
            let run = try await Replay.run([path, "--timeout", "1s"], in: directory, timeout: .seconds(30))
            #expect(run.status == 1, "stdout: \(run.lines) stderr: \(run.stderr)")
            let line = try #require(run.requestLines.first, "\(run.lines)")
            #expect(line.hasPrefix("200        1 B → 504 "), "\(line)")
            #expect(line.contains("GET \(url)  status changed, failed: hookproxy: timeout waiting for 127.0.0.1:\(origin.port)"), "\(line)")
        }
    }

    @Test("https entries go through the rules too: a trust rule decides the upstream TLS, the POST body arrives")
    func https() async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.writePEM([Self.testCA.root], to: "R.pem")
        try directory.write("""
            rules:
              - name: trust-test-root
                match: { host: localhost }
                trust: { ca_file: "\(root)" }

            """, to: "tls-rules/trust.yaml")
        try await withOrigin(tls: Self.testCA.identity([Self.testCA.leaf, Self.testCA.intermediate])) { origin in
            let base = "https://localhost:\(origin.port)"
            let path = try directory.write(Replay.har([("GET", "\(base)/head-test", 200, 15, nil),
                                                       ("POST", "\(base)/echo", 200, 9, "ping pong")]), to: "tls.har")
            let out = directory.path + "/out.har"
            let run = try await Replay.run([path, "--rules", directory.path + "/tls-rules", "--har", out], in: directory)
            #expect(run.status == 0, "stdout: \(run.lines) stderr: \(run.stderr)")
            #expect(run.requestLines == ["200       15 B → 200       15 B  GET \(base)/head-test",
                                         "200        9 B → 200        9 B  POST \(base)/echo"], "\(run.lines)")
            #expect(origin.requests.last?.body == Array("ping pong".utf8))
            let entries = LogFiles.harEntries(out) ?? []
            let events = entries.compactMap { ($0["_hookproxy"] as? [String: Any])?["events"] as? [[String: Any]] }
            #expect(events.count == 2 && events.allSatisfy { $0.contains { ($0["hook"] as? String) == "trust" } }, "\(entries)")

            // Without the rule (no --rules, no ./rules), the test CA is not trusted: the proxy's TLS failure, exit 1.
            let untrusted = try await Replay.run([path, "--only", "*/head-test"], in: directory)
            #expect(untrusted.status == 1, "stdout: \(untrusted.lines) stderr: \(untrusted.stderr)")
            #expect(untrusted.requestLines.first?.contains("failed: hookproxy: TLS failure localhost") == true,
                    "\(untrusted.lines)")
        }
    }

    @Test("a malformed HAR exits 1 naming the file and the entry; bad flags are usage errors (64)")
    func errors() async throws {
        let directory = try TemporaryDirectory()
        let broken = try directory.write(#"""
            {"log":{"version":"1.2","creator":{"name":"x","version":"1"},"entries":[
            {"request":{"method":"GET","url":"http://127.0.0.1:1/"},"response":{"status":200}}
            ,{"request":{"method":"GET"},"response":{"status":200}}
            ]}}
            """#, to: "broken.har")
        let run = try await Replay.run([broken], in: directory)
        #expect(run.status == 1)
        #expect(run.stderr.contains("hookproxy: \(broken): entry 2: request.url is missing"), "\(run.stderr)")
        #expect(run.lines.isEmpty, "nothing is sent from a broken file: \(run.lines)")

        let truncated = try directory.write(#"{"log":{"entries":[{"request":"#, to: "cut.har")
        let cut = try await Replay.run([truncated], in: directory)
        #expect(cut.status == 1)
        #expect(cut.stderr.contains("hookproxy: \(truncated): it is not valid JSON"), "\(cut.stderr)")

        let missing = try await Replay.run([directory.path + "/none.har"], in: directory)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("none.har: cannot read it: No such file or directory"), "\(missing.stderr)")

        for (flags, words) in [(["--concurrency", "0"], "--concurrency must be at least 1"),
                               (["--only", "[ab]"], "--only '[ab]' is not a glob"),
                               (["--har", broken], "is the file being replayed"),
                               (["--timeout", "soon"], "--timeout takes seconds")] {
            let usage = try await Replay.run([broken] + flags, in: directory)
            #expect(usage.status == 64, "\(flags): \(usage.stderr)")
            #expect(usage.stderr.contains(words), "\(flags): \(usage.stderr)")
        }
    }
}
