import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 18, item 3: throttling. Real curl → hookproxy (in-process) → TestOrigin on 127.0.0.1. Rates are measured
/// over 2 MiB bodies at 8000 kbps (1 MB/s, about 2 s a test) and must not beat the setting by more than 20 % (nor lag far behind it); the token
/// bucket's burst (50 ms of traffic) and connection set-up are a few percent of that.
@Suite("throttling", .timeLimit(.minutes(2)))
struct ThrottleTests {
    static let twoMiB = 2 * 1024 * 1024

    /// What curl's `-w` reported for one transfer.
    struct Timing {
        var firstByte: Double
        var total: Double
        var downloaded: Int
        var body: String
    }

    /// `curl -x PROXY -w …` with the body kept (upload answers are short) and the timings on the last line.
    static func timed(_ proxy: ProxyHarness, _ args: [String], timeout: Duration = .seconds(30)) async throws -> (CurlCLI.Result, Timing) {
        let result = try await CurlCLI.run(
            ["-s", "-S", "-H", "Expect:", "-x", proxy.proxyURL, "-w", "\n%{time_starttransfer} %{time_total} %{size_download}"] + args,
            timeout: timeout)
        let text = result.stdoutText
        let lastLine = text.split(separator: "\n").last.map(String.init) ?? ""
        let fields = lastLine.split(separator: " ")
        let timing = Timing(firstByte: fields.count == 3 ? Double(fields[0]) ?? -1 : -1,
                            total: fields.count == 3 ? Double(fields[1]) ?? -1 : -1,
                            downloaded: fields.count == 3 ? Int(fields[2]) ?? -1 : -1,
                            body: String(text.dropLast(lastLine.count + 1)))
        return (result, timing)
    }

    /// A proxy with `throttle` as its `--throttle` and `yaml` as its rules (none when nil).
    func withThrottledProxy(_ throttle: Throttle?, rules yaml: String? = nil, eventLoops: Int? = nil,
                            _ body: (ProxyHarness, TestOrigin) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try yaml.map { try Hooks.store(directory, $0) }
        try await withOrigin { origin in
            try await withHookProxy(rules: store, { configuration in
                configuration.throttle = throttle
                if let eventLoops { configuration.eventLoops = eventLoops }
            }) { proxy in try await body(proxy, origin) }
        }
    }

    static func expectRate(_ bytes: Int, seconds: Double, bytesPerSecond: Double, _ what: String,
                           sourceLocation: SourceLocation = #_sourceLocation) {
        let rate = Double(bytes) / seconds
        // Never faster than the limit (+20 %: the pacer's first burst): that is what throttling promises. The lower
        // bound only catches a pacer that waits far too long: a machine busy with the rest of the suite delivers
        // late, so it is loose (a fixed ±20 % failed in full runs beside other work).
        #expect(rate > bytesPerSecond * 0.4 && rate < bytesPerSecond * 1.2,
                "\(what): \(Int(rate)) bytes/s over \(seconds) s, wanted \(Int(bytesPerSecond)), at most +20 %",
                sourceLocation: sourceLocation)
        print("throttle test: \(what): \(Int(rate)) bytes/s (\(String(format: "%.0f", rate * 8 / 1000)) kbps), \(bytes) bytes in \(seconds) s")
    }

    // MARK: rates

    @Test("download at 8000 kbps: 2 MiB in about 2.1 s, never faster than the setting, every byte intact")
    func downloadRate() async throws {
        try await withThrottledProxy(Throttle(downKbps: 8000)) { proxy, origin in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let output = directory.path + "/body"
            let (result, timing) = try await Self.timed(proxy, ["-o", output, "\(origin.baseURL)/bytes/\(Self.twoMiB)"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(timing.downloaded == Self.twoMiB)
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: output)))
            #expect(isPattern(bytes, count: Self.twoMiB), "\(patternMismatch(bytes, count: Self.twoMiB))")
            Self.expectRate(Self.twoMiB, seconds: timing.total, bytesPerSecond: 1_000_000, "download 8000 kbps")
            let record = try #require(await Hooks.records(proxy).first)
            #expect(record.events.contains(HookEvent(hook: .throttle, action: "throttled down 8000 kbps", detail: "--throttle")),
                    "\(record.events)")
        }
    }

    @Test("upload at 8000 kbps: a 2 MiB POST reaches the origin whole in about 2.1 s, never faster than the setting")
    func uploadRate() async throws {
        try await withThrottledProxy(Throttle(upKbps: 8000)) { proxy, origin in
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let body = pattern(count: Self.twoMiB)
            let file = try directory.write(body, to: "upload")
            let (result, timing) = try await Self.timed(proxy, ["--data-binary", "@\(file)", "\(origin.baseURL)/sha256"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(timing.body == "\(sha256Hex(body)) \(Self.twoMiB)")
            Self.expectRate(Self.twoMiB, seconds: timing.total, bytesPerSecond: 1_000_000, "upload 8000 kbps")
        }
    }

    @Test("a preset as --throttle: 3g paces the download at 1440 kbps after 563 ms of latency")
    func preset() async throws {
        let preset = try #require(Throttle.preset(named: "3g"))
        try await withThrottledProxy(preset) { proxy, origin in
            let size = 512 * 1024  // 180 000 bytes/s: about 2.9 s
            let (result, timing) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/\(size)"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(timing.downloaded == size)
            #expect(timing.firstByte >= 0.563, "time to first byte \(timing.firstByte) s")
            Self.expectRate(size, seconds: timing.total - timing.firstByte, bytesPerSecond: 180_000, "download 3g")
            let record = try #require(await Hooks.records(proxy).first)
            #expect(Hooks.eventTexts([record]).contains("throttled down 1440 kbps up 675 kbps latency 563 ms: --throttle"),
                    "\(Hooks.eventTexts([record]))")
        }
    }

    @Test("a rule's throttle wins per field: its down_kbps over --throttle's, --throttle's latency kept")
    func ruleOverridesGlobal() async throws {
        let yaml = """
            rules:
              - name: fast-bytes
                match: { path: "/bytes/*" }
                throttle: { down_kbps: 8000 }
            """
        try await withThrottledProxy(Throttle(downKbps: 800, latencyMs: 300), rules: yaml) { proxy, origin in
            let (result, timing) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/\(Self.twoMiB)"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(timing.firstByte >= 0.3, "time to first byte \(timing.firstByte) s")
            Self.expectRate(Self.twoMiB, seconds: timing.total - timing.firstByte, bytesPerSecond: 1_000_000,
                            "download, rule 8000 kbps over --throttle 800")
            let record = try #require(await Hooks.records(proxy).first)
            #expect(Hooks.eventTexts([record]).contains("throttled down 8000 kbps latency 300 ms: rules, then --throttle"),
                    "\(Hooks.eventTexts([record]))")
        }
    }

    @Test("latency_ms holds the request: time to first byte grows by at least latency_ms")
    func latency() async throws {
        let yaml = """
            rules:
              - name: far-away
                match: { query: { far: "1" } }
                throttle: { latency_ms: 700 }
            """
        try await withThrottledProxy(nil, rules: yaml) { proxy, origin in
            let (near, nearTiming) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/100"])
            let (far, farTiming) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/100?far=1"])
            #expect(near.exitCode == 0 && far.exitCode == 0, "\(near.stderr) \(far.stderr)")
            #expect(farTiming.firstByte >= 0.7, "throttled time to first byte \(farTiming.firstByte) s")
            #expect(nearTiming.firstByte < farTiming.firstByte, "near \(nearTiming.firstByte) s, far \(farTiming.firstByte) s")
        }
    }

    // MARK: isolation, leaving, memory

    @Test("an unthrottled download on the same event loop stays fast while a throttled one crawls")
    func unthrottledStaysFast() async throws {
        let yaml = """
            rules:
              - name: crawl
                match: { query: { slow: "1" } }
                throttle: { down_kbps: 400 }
            """
        try await withThrottledProxy(nil, rules: yaml, eventLoops: 1) { proxy, origin in
            let slow = Task {
                try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL, "--max-time", "6", "-o", "/dev/null",
                                       "-w", "%{size_download}", "\(origin.baseURL)/bytes/\(Self.twoMiB)?slow=1"])
            }
            try await Task.sleep(for: .milliseconds(500))
            let (fast, timing) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/\(Self.twoMiB)"])
            #expect(fast.exitCode == 0, "\(fast.stderr)")
            #expect(timing.downloaded == Self.twoMiB)
            #expect(timing.total < 1.5, "the unthrottled 2 MiB took \(timing.total) s")  // throttled: 42 s
            let slowResult = try await slow.value
            #expect(slowResult.exitCode == 28, "the throttled one ran to --max-time: \(slowResult.stderr)")
            let slowBytes = Int(slowResult.stdoutText) ?? -1
            // 50 000 bytes/s for about 6 s
            #expect(slowBytes > 200_000 && slowBytes < 400_000, "throttled download got \(slowBytes) bytes in 6 s")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("a client that leaves mid-throttle ends its exchange; the proxy serves the next one")
    func clientLeaves() async throws {
        try await withThrottledProxy(Throttle(downKbps: 800, upKbps: 800)) { proxy, origin in
            let left = try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL, "--max-time", "1", "-o", "/dev/null",
                                              "\(origin.baseURL)/bytes/\(Self.twoMiB)"])
            #expect(left.exitCode == 28, "\(left.stderr)")
            let gone = await proxy.recorder.waitFor(count: 1, timeout: .seconds(5))
            #expect(gone.first?.error == "client closed the connection", "\(gone.map(\.error))")
            // An upload: what the client had written into its socket before leaving (here all of it: loopback
            // buffers take 300 000 bytes at once) is still read at the rate, and the end of the connection after it.
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let file = try directory.write(pattern(count: 300_000), to: "upload")
            let leftUpload = try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL, "--max-time", "1", "-H", "Expect:",
                                                    "--data-binary", "@\(file)", "\(origin.baseURL)/sha256"])
            #expect(leftUpload.exitCode == 28, "\(leftUpload.stderr)")
            let records = await proxy.recorder.waitFor(count: 2, timeout: .seconds(10))
            #expect(records.count == 2 && records.allSatisfy { $0.error == "client closed the connection" },
                    "\(records.map { "\($0.url) \($0.requestBodySize) \($0.error ?? "")" })")
            let (next, timing) = try await Self.timed(proxy, ["-o", "/dev/null", "\(origin.baseURL)/bytes/1000"])
            #expect(next.exitCode == 0 && timing.downloaded == 1000, "\(next.stderr)")
            #expect(origin.requests.last?.target == "/bytes/1000")
        }
    }

    @Test("a slow download is not buffered: at 100 kbps the origin's lead over the client stops growing")
    func boundedMemory() async throws {
        try await withThrottledProxy(Throttle(downKbps: 100)) { proxy, origin in
            let size = 20 * 1024 * 1024
            let download = Task {
                try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL, "--max-time", "7", "-o", "/dev/null",
                                       "-w", "%{size_download}", "\(origin.baseURL)/bytes/\(size)"])
            }
            // Counted from the origin's first byte, not from the start: on a loaded machine starting curl and
            // connecting took over 2 s, and the buffers' first fill then fell between the two readings.
            #expect(await eventually(timeout: .seconds(10)) { origin.bytesStreamed > 0 })
            try await Task.sleep(for: .seconds(2))
            let early = origin.bytesStreamed
            try await Task.sleep(for: .seconds(2))
            let late = origin.bytesStreamed
            let result = try await download.value
            #expect(result.exitCode == 28, "\(result.stderr)")
            let received = Int(result.stdoutText) ?? -1
            print("throttle test: 100 kbps: client received \(received) bytes in 7 s; origin wrote \(early) by 2 s after its first byte, \(late) by 4 s")
            // 12 500 bytes/s: at least 3.2 s of it however late curl started, never much more than 7 s of it.
            #expect(received > 40_000 && received < 120_000, "12 500 bytes/s for at most 7 s, got \(received)")
            // Whatever socket buffers took at the start (a few MiB on loopback), the origin then writes only what
            // the client reads (25 000 bytes in 2 s) plus what refills the bridge: the lead is bounded.
            #expect(late - early < 512 * 1024, "the origin wrote \(late - early) bytes between 2 s and 4 s")
            #expect(late < size / 2, "the origin wrote \(late) of \(size) bytes")
        }
    }
}

/// `hookproxy run --throttle`: a preset starts; a wrong value is a usage error that lists what to write.
@Suite("throttle flag", .timeLimit(.minutes(1)))
struct ThrottleFlagTests {
    @Test("--throttle slow-3g starts the proxy")
    func presetAccepted() async throws {
        let workdir = try TemporaryDirectory()
        defer { workdir.remove() }
        let cli = try CLIProcess(CLITests.binary, ["run", "--listen", "127.0.0.1:0", "--throttle", "slow-3g"],
                                 directory: workdir.path)
        defer { cli.kill() }
        let line = await cli.waitForLine { $0.hasPrefix("hookproxy listening on ") }
        #expect(line != nil, "stdout: \(cli.stdoutLines) stderr: \(cli.stderrText)")
    }

    @Test("--throttle bogus exits 64 naming the flag, the presets and the SPEC form")
    func bogusRefused() async throws {
        let workdir = try TemporaryDirectory()
        defer { workdir.remove() }
        let cli = try CLIProcess(CLITests.binary, ["run", "--listen", "127.0.0.1:0", "--throttle", "bogus"],
                                 directory: workdir.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: .seconds(20))
        #expect(status == 64, "stderr: \(cli.stderrText)")
        let stderr = cli.stderrText
        #expect(stderr.contains("--throttle: 'bogus' is not a throttle (unknown preset)"), "\(stderr)")
        #expect(stderr.contains("3g, slow-3g, edge") && stderr.contains("down=KBPS,up=KBPS,latency=MS"), "\(stderr)")
        #expect(cli.stdoutLines.isEmpty)
    }
}
