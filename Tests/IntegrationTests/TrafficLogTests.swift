import Foundation
import ProxyTestSupport
import Testing

/// Issue 6 through the built `hookproxy` binary and real sockets: `--har` and `--jsonl` after real exchanges (plain,
/// failed, redirected hop by hop, challenged), checked by a JSON Schema validator and an independent HAR reader
/// (haralyzer, from `make pydeps`), while the proxy runs, after SIGTERM and after SIGKILL; redaction; binary bodies;
/// the capture limit; the lock on the HAR file.
@Suite("traffic log files", .timeLimit(.minutes(3)))
struct TrafficLogTests {
    static let password = "pw-Zq81xLog"
    static let basicToken = Data("alice:\(password)".utf8).base64EncodedString()

    static func rules(_ origin: TestOrigin) -> String {
        """
        rules:
          - name: follow-chain
            match: { port: \(origin.port), path: "/redirect-chain/*" }
            on_redirect: { action: follow }
          - name: login
            match: { port: \(origin.port), path: "/auth/basic" }
            on_challenge: { action: use_credential, schemes: [basic], username: alice, password_env: HP_LOG_TEST_PW }

        """
    }

    /// Starts the binary with the rules above and the log files, runs `body`, and always stops it.
    func withLoggingProxy(_ origin: TestOrigin, _ extra: [String] = [],
                          _ body: (HookproxyProcess, _ har: String, _ jsonl: String, TemporaryDirectory) async throws -> Void)
        async throws {
        let directory = try TemporaryDirectory()
        try directory.write(Self.rules(origin), to: "rules/rules.yaml")
        let har = directory.path + "/traffic.har", jsonl = directory.path + "/traffic.jsonl"
        try await HookproxyProcess.with(
            ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules", "--har", har, "--jsonl", jsonl] + extra,
            environment: ["HP_LOG_TEST_PW": Self.password], directory: directory) { proxy in
            try await body(proxy, har, jsonl, directory)
        }
    }

    /// The mixed traffic: plain POST with secrets, a refused port, a 2-hop followed redirect, a Basic challenge
    /// answered by the rule, three Set-Cookie headers. 7 upstream exchanges.
    static func mixedTraffic(_ proxy: HookproxyProcess, _ origin: TestOrigin, closedPort: Int) async throws {
        let plain = try await proxy.curl("\(origin.baseURL)/echo?token=qq-query-secret",
                                         ["--data-binary", "hello log", "-H", "Authorization: Bearer tok-AAA-secret",
                                          "-H", "Cookie: sid=ck-BBB-secret", "-H", "Content-Type: text/plain"])
        #expect(plain.bodyText == "hello log")
        let failed = try await proxy.curl("http://127.0.0.1:\(closedPort)/nothing")
        #expect(failed.status == 502)
        let redirected = try await proxy.curl("\(origin.baseURL)/redirect-chain/2")
        #expect(redirected.bodyText == "chain done\n")
        // The route takes the password it expects in the query: percent-encoded whole, so the client's own URL (which
        // the log keeps as sent: secrets are masked by position, issue 11) does not spell it.
        let encoded = password.utf8.map { String(format: "%%%02X", $0) }.joined()
        let challenged = try await proxy.curl("\(origin.baseURL)/auth/basic?user=alice&pass=\(encoded)",
                                              ["--data-binary", "behind auth"])
        #expect(challenged.status == 200)
        #expect(challenged.bodyText == "behind auth")
        let cookies = try await proxy.curl("\(origin.baseURL)/set-cookies")
        #expect(cookies.status == 200)
    }

    static func hookproxy(_ entry: [String: Any]) -> [String: Any] { entry["hookproxy"] as? [String: Any] ?? [:] }
    static func eventActions(_ extra: [String: Any]) -> [String] {
        (extra["events"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
    }

    @Test("N exchanges: the HAR validates and haralyzer reads it while the proxy runs and after SIGTERM; JSONL lines carry every SPEC key")
    func mixedTrafficLogs() async throws {
        let refusing = try Hooks.closedPort()
        let closedPort = refusing.port
        defer { withExtendedLifetime(refusing) {} }
        try await withOrigin { origin in
            try await withLoggingProxy(origin, ["--redact-query", "token"]) { proxy, har, jsonl, directory in
                try await Self.mixedTraffic(proxy, origin, closedPort: closedPort)
                let running = await LogFiles.waitForHAR(har, count: 7)
                #expect(running.count >= 7)
                // Valid while the proxy still runs.
                let whileRunning = try await LogFiles.checkHAR(har, directory: directory)
                #expect(whileRunning.count >= 7)

                let status = await proxy.stop()
                #expect(status == 0, "SIGTERM exits 0: \(proxy.stderr)")
                let entries = try await LogFiles.checkHAR(har, directory: directory)
                #expect(entries.count == 7, "\(entries.map { $0["url"] ?? "" })")

                // plain
                let plain = try #require(entries.first { ($0["url"] as? String)?.contains("/echo") == true })
                #expect(plain["method"] as? String == "POST")
                #expect(plain["status"] as? Int == 200)
                #expect(plain["body_bytes"] as? [Int] == Array("hello log".utf8).map(Int.init))
                #expect((plain["url"] as? String)?.contains("qq-query-secret") == false)
                // failed
                let failed = try #require(entries.first { ($0["url"] as? String)?.contains(":\(closedPort)/") == true })
                let failedError = Self.hookproxy(failed)["error"] as? String ?? ""
                #expect(failedError.contains("127.0.0.1:\(closedPort)") || failedError.contains("127.0.0.1"), "\(failedError)")
                // redirected: one entry per hop with _hookproxy.hop
                let hops = entries.filter { ($0["url"] as? String)?.contains("/redirect-chain/") == true }
                #expect(hops.compactMap { Self.hookproxy($0)["hop"] as? Int } == [0, 1, 2])
                #expect(hops.compactMap { $0["status"] as? Int } == [302, 302, 200])
                #expect(hops.last.map { Self.eventActions(Self.hookproxy($0)) }?.contains("redirect followed 2 hops") == true,
                        "\(hops.map { Self.hookproxy($0) })")
                #expect(hops.allSatisfy { (Self.hookproxy($0)["rules"] as? [String]) == ["follow-chain"] })
                // challenged
                let challenged = try #require(entries.first { ($0["url"] as? String)?.contains("/auth/basic") == true })
                #expect(challenged["status"] as? Int == 200)
                #expect(Self.eventActions(Self.hookproxy(challenged)).contains("challenge answered basic"),
                        "\(Self.hookproxy(challenged))")

                // JSONL: one line per hop, every SPEC key.
                let lines = LogFiles.jsonlLines(jsonl)
                #expect(lines.count == 7)
                for line in lines {
                    let object = try #require(line, "a JSONL line does not parse")
                    for key in LogFiles.jsonlKeys { #expect(object.keys.contains(key), "missing \(key)") }
                    let timings = object["timings"] as? [String: Any] ?? [:]
                    for key in LogFiles.timingKeys { #expect(timings.keys.contains(key), "missing timings.\(key)") }
                }
                let objects = lines.compactMap { $0 }
                let plainLine = try #require(objects.first { ($0["url"] as? String)?.contains("/echo") == true })
                #expect(plainLine["request_body"] as? String == "hello log")
                // /echo answers application/octet-stream, so the log may keep its body as base64.
                let responseBody = plainLine["response_body"] as? String
                #expect(plainLine["response_body_encoding"] as? String == "base64"
                        ? responseBody.flatMap { Data(base64Encoded: $0) } == Data("hello log".utf8)
                        : responseBody == "hello log", "\(plainLine)")
                #expect(plainLine["status"] as? Int == 200)
                #expect((plainLine["upstream_url"] as? String)?.hasPrefix(origin.baseURL + "/echo") == true)
                #expect(((plainLine["timings"] as? [String: Any])?["total"] as? Double).map { $0 >= 0 } == true)
                let failedLine = try #require(objects.first { ($0["url"] as? String)?.contains(":\(closedPort)/") == true })
                #expect(failedLine["error"] is String)

                // Redaction by default: header secrets, the rule's password, the named query parameter.
                let harText = try String(contentsOfFile: har, encoding: .utf8)
                let jsonlText = try String(contentsOfFile: jsonl, encoding: .utf8)
                // The origin's X-Target header echoes the request target; --redact-query is about URLs, so that
                // one echoed value is not counted.
                let echoed = "\"/echo?token=qq-query-secret\""
                for text in [harText, jsonlText, proxy.stdout].map({ $0.replacingOccurrences(of: echoed, with: "") }) {
                    for secret in ["tok-AAA-secret", "ck-BBB-secret", Self.password, Self.basicToken, "qq-query-secret"] {
                        #expect(!text.contains(secret), "\(secret) leaked")
                    }
                }
                for text in [harText, jsonlText] {
                    #expect(text.contains("<redacted>"))
                    #expect(!text.contains("a=1"), "Set-Cookie values are redacted")
                }
            }
        }
    }

    @Test("--log-secrets keeps Authorization, Cookie and Set-Cookie; the on_challenge password never appears")
    func logSecrets() async throws {
        let refusing = try Hooks.closedPort()
        let closedPort = refusing.port
        defer { withExtendedLifetime(refusing) {} }
        try await withOrigin { origin in
            try await withLoggingProxy(origin, ["--log-secrets"]) { proxy, har, jsonl, directory in
                try await Self.mixedTraffic(proxy, origin, closedPort: closedPort)
                _ = await LogFiles.waitForHAR(har, count: 7)
                #expect(await proxy.stop() == 0)
                _ = try await LogFiles.checkHAR(har, directory: directory)
                let harText = try String(contentsOfFile: har, encoding: .utf8)
                let jsonlText = try String(contentsOfFile: jsonl, encoding: .utf8)
                for text in [harText, jsonlText] {
                    #expect(text.contains("Bearer tok-AAA-secret"))
                    #expect(text.contains("sid=ck-BBB-secret"))
                    #expect(text.contains("a=1"))
                    #expect(!text.contains(Self.password), "the on_challenge password leaked")
                    #expect(!text.contains(Self.basicToken), "the credential hookproxy added leaked")
                }
                #expect(!proxy.stdout.contains(Self.password))
            }
        }
    }

    @Test("binary bodies round-trip through base64 (HAR via haralyzer, JSONL)")
    func binaryBodies() async throws {
        try await withOrigin { origin in
            try await withLoggingProxy(origin) { proxy, har, jsonl, directory in
                let response = try await proxy.curl("\(origin.baseURL)/bytes/1000")
                #expect(isPattern(response.body, count: 1000), "\(patternMismatch(response.body, count: 1000))")
                let upload = (0..<256).map { UInt8($0) }
                let file = try directory.write(upload, to: "upload.bin")
                let echoed = try await proxy.curl("\(origin.baseURL)/echo",
                                                  ["--data-binary", "@\(file)", "-H", "Content-Type: application/octet-stream"])
                #expect(echoed.body == upload)
                _ = await LogFiles.waitForHAR(har, count: 2)
                #expect(await proxy.stop() == 0)

                let entries = try await LogFiles.checkHAR(har, directory: directory)
                let bytes = try #require(entries.first { ($0["url"] as? String)?.hasSuffix("/bytes/1000") == true })
                #expect(bytes["body_bytes"] as? [Int] == pattern(count: 1000).map(Int.init))
                let echo = try #require(entries.first { ($0["url"] as? String)?.hasSuffix("/echo") == true })
                #expect(echo["body_bytes"] as? [Int] == upload.map(Int.init))

                let lines = LogFiles.jsonlLines(jsonl).compactMap { $0 }
                let bytesLine = try #require(lines.first { ($0["url"] as? String)?.hasSuffix("/bytes/1000") == true })
                #expect(bytesLine["response_body_encoding"] as? String == "base64")
                let decoded = (bytesLine["response_body"] as? String).flatMap { Data(base64Encoded: $0) }
                #expect(decoded.map(Array.init) == pattern(count: 1000))
                let echoLine = try #require(lines.first { ($0["url"] as? String)?.hasSuffix("/echo") == true })
                let request = (echoLine["request_body"] as? String).flatMap { Data(base64Encoded: $0) }
                #expect(request.map(Array.init) == upload, "\(echoLine["request_body"] ?? "nil")")
            }
        }
    }

    @Test("a body over --capture-limit is logged truncated (HAR _hookproxy.truncated, JSONL truncated)")
    func captureLimit() async throws {
        try await withOrigin { origin in
            try await withLoggingProxy(origin, ["--capture-limit", "1KiB"]) { proxy, har, jsonl, directory in
                let response = try await proxy.curl("\(origin.baseURL)/bytes/5000")
                #expect(response.body == pattern(count: 5000), "the client still gets every byte")
                _ = await LogFiles.waitForHAR(har, count: 1)
                #expect(await proxy.stop() == 0)

                let entries = try await LogFiles.checkHAR(har, directory: directory)
                let entry = try #require(entries.first)
                let truncated = Self.hookproxy(entry)["truncated"] as? [String: Any]
                #expect(truncated?["response"] as? Bool == true, "\(Self.hookproxy(entry))")
                #expect((entry["body_bytes"] as? [Int])?.count == 1024)

                let line = try #require(LogFiles.jsonlLines(jsonl).first ?? nil)
                #expect((line["truncated"] as? [String: Any])?["response"] as? Bool == true)
                #expect(line["response_body_size"] as? Int == 5000)
                let decoded = (line["response_body"] as? String).flatMap { Data(base64Encoded: $0) }
                #expect(decoded.map(Array.init) == pattern(count: 1024))
            }
        }
    }

    @Test("after SIGKILL mid-traffic the HAR on disk is still valid, with every entry written before the kill")
    func sigkillMidTraffic() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let har = directory.path + "/killed.har"
            let jsonl = directory.path + "/killed.jsonl"
            let child = try HookproxyProcess(
                arguments: ["run", "--listen", "127.0.0.1:0", "--har", har, "--jsonl", jsonl, "--quiet"],
                directory: directory)
            do {
                let started = try await child.start()
                try #require(started, "\(child.stderr)")
                let stop = LockedBox(false)
                // Traffic keeps flowing (bounded: at most 200 requests, each bounded by curl's --max-time).
                let traffic = Task {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { _ = try await child.curl("\(origin.baseURL)/drip?chunks=50&interval_ms=100") }
                        group.addTask {
                            var n = 0
                            while !stop.value && n < 200 {
                                n += 1
                                _ = try await child.curl("\(origin.baseURL)/bytes/\(100 + n)", ["--max-time", "5"])
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                let enough = await eventually(timeout: .seconds(20), interval: .milliseconds(5)) {
                    (LogFiles.harEntries(har)?.count ?? 0) >= 15
                }
                #expect(enough)
                let before = LogFiles.harEntries(har)?.count ?? 0
                child.killNow()
                stop.value = true
                _ = try? await traffic.value
                #expect(child.process.terminationReason == .uncaughtSignal)

                let entries = try await LogFiles.checkHAR(har, directory: directory)
                #expect(entries.count >= before, "entries seen before the kill were lost")
                #expect(entries.allSatisfy { Self.hookproxy($0)["id"] is Int })
                // JSONL: every newline-terminated line is a complete object (at most the last line was cut).
                let text = String(decoding: FileManager.default.contents(atPath: jsonl) ?? Data(), as: UTF8.self)
                let complete = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                #expect(!complete.isEmpty)
                #expect(complete.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) is [String: Any] })
                // --quiet: the listening line only on stdout, the files still written.
                #expect(child.stdout.split(separator: "\n").count == 1, "\(child.stdout)")
            } catch {
                child.killNow()
                throw error
            }
            child.killNow()
        }
    }

    @Test("local answers (respond, redirect_client), HEAD, 204, 304, a chunked body and a client that gives up: the HAR still validates")
    func oddExchangesValidate() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            try directory.write("""
                rules:
                  - name: mock
                    match: { port: \(origin.port), path: "/mock" }
                    respond: { status: 418, headers: { X-Mock: "1" }, body: "teapot\\n" }
                  - name: bounce
                    match: { port: \(origin.port), path: "/bounce" }
                    redirect_client: { location: "http://127.0.0.1:\(origin.port)/echo" }
                """, to: "rules/rules.yaml")
            let har = directory.path + "/odd.har", jsonl = directory.path + "/odd.jsonl"
            try await HookproxyProcess.with(
                ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules", "--har", har, "--jsonl", jsonl],
                directory: directory) { proxy in
                #expect(try await proxy.curl("\(origin.baseURL)/mock").status == 418)
                #expect(try await proxy.curl("\(origin.baseURL)/bounce").status == 302)
                #expect(try await proxy.curl("\(origin.baseURL)/head-test", ["-I"]).status == 200)
                #expect(try await proxy.curl("\(origin.baseURL)/status/204").status == 204)
                #expect(try await proxy.curl("\(origin.baseURL)/status/304").status == 304)
                #expect(try await proxy.curl("\(origin.baseURL)/chunked/3000").body == pattern(count: 3000))
                let gaveUp = try await proxy.curl("\(origin.baseURL)/hang", ["--max-time", "1"])
                #expect(gaveUp.exitCode != 0)
                _ = await LogFiles.waitForHAR(har, count: 7)
                #expect(await proxy.stop() == 0)
                let entries = try await LogFiles.checkHAR(har, directory: directory)
                #expect(entries.count == 7, "\(entries.map { $0["url"] ?? "" })")
                let mock = entries.first { ($0["url"] as? String)?.hasSuffix("/mock") == true }
                #expect(mock?["status"] as? Int == 418)
                #expect(mock?["body_bytes"] as? [Int] == Array("teapot\n".utf8).map(Int.init))
                #expect(mock.map { Self.eventActions(Self.hookproxy($0)) }?.contains("responded 418") == true)
                let hang = entries.first { ($0["url"] as? String)?.hasSuffix("/hang") == true }
                #expect(hang.map { Self.hookproxy($0)["error"] is String } == true, "\(hang ?? [:])")
                let lines = LogFiles.jsonlLines(jsonl)
                #expect(lines.count == 7)
                #expect(lines.allSatisfy { $0 != nil })
                let mockLine = lines.compactMap { $0 }.first { ($0["url"] as? String)?.hasSuffix("/mock") == true }
                #expect(mockLine?["upstream_url"] is NSNull, "a local answer has no upstream URL")
            }
        }
    }

    @Test("a request body sent to a local answer (respond) is logged with its size and bytes")
    func requestBodyOfLocalAnswer() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            try directory.write("""
                rules:
                  - name: mock
                    match: { port: \(origin.port) }
                    respond: { body: "stored\\n" }
                """, to: "rules/rules.yaml")
            let jsonl = directory.path + "/local.jsonl"
            try await HookproxyProcess.with(
                ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules", "--jsonl", jsonl],
                directory: directory) { proxy in
                let response = try await proxy.curl("\(origin.baseURL)/upload", ["--data-binary", "uploaded text"])
                #expect(response.bodyText == "stored\n")
                _ = await LogFiles.waitForJSONL(jsonl, count: 1)
                #expect(await proxy.stop() == 0)
                let line = try #require(LogFiles.jsonlLines(jsonl).first ?? nil)
                #expect(line["response_body"] as? String == "stored\n")
                #expect(line["request_body_size"] as? Int == 13)
                #expect(line["request_body"] as? String == "uploaded text")
            }
        }
    }

    @Test("a second proxy on the same HAR file refuses with a clear error and exit 1")
    func secondWriterRefused() async throws {
        let directory = try TemporaryDirectory()
        let har = directory.path + "/shared.har"
        try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--har", har], directory: directory) { first in
            let second = try HookproxyProcess(arguments: ["run", "--listen", "127.0.0.1:0", "--har", har],
                                              directory: directory)
            let started = try await second.start()
            let status = await second.waitForExit()
            #expect(!started)
            #expect(status == 1)
            #expect(second.stderr.contains("\(har) is being written by another hookproxy"), "\(second.stderr)")
            #expect(second.stderr.contains("pid \(first.process.processIdentifier)"), "\(second.stderr)")
            // The first one is unaffected.
            #expect(first.process.isRunning)
            #expect(LogFiles.harEntries(har) != nil)
        }
    }
}
