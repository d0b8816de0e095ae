import Foundation
import Synchronization
import ProxyTestSupport
import Testing

/// The built `hookproxy` binary (`swift build --build-tests` puts it next to the test bundle), run as a user would.
@Suite("hookproxy command line")
struct CLITests {
    static let binary = repositoryRoot().appendingPathComponent(".build/debug/hookproxy").path

    @Test("run: the first stdout line names the real port, an exchange line follows, SIGTERM exits 0")
    func runListensLogsAndStops() async throws {
        let workdir = try TemporaryDirectory()  // no ./rules here: a plain logging proxy
        let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0"], directory: workdir.path)
        defer { cli.kill() }
        let first = try #require(await cli.waitForLine { _ in true }, "no stdout line; stderr: \(cli.stderrText)")
        #expect(cli.stdoutLines.first == first)
        let prefix = "hookproxy listening on http://127.0.0.1:"
        #expect(first.hasPrefix(prefix), "first line: \(first)")
        let port = try #require(Int(first.dropFirst(prefix.count)), "first line: \(first)")
        #expect(port > 0 && port != 8080)

        try await withOrigin { origin in
            let result = try await CurlCLI.run(["-s", "-S", "-x", "http://127.0.0.1:\(port)", "\(origin.baseURL)/bytes/1234"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(isPattern(result.stdout, count: 1234), "\(patternMismatch(result.stdout, count: 1234))")
            let url = "\(origin.baseURL)/bytes/1234"
            let line = await cli.waitForLine { $0.contains(url) }
            #expect(line != nil, "no exchange line for \(url); stdout: \(cli.stdoutLines)")
            if let line {
                #expect(line.contains("200"), "\(line)")
                #expect(line.contains("GET"), "\(line)")
            }
        }

        cli.signal(SIGTERM)
        let status = await cli.waitForExit(timeout: .seconds(10))
        #expect(status == 0, "exit status after SIGTERM: \(String(describing: status)); stderr: \(cli.stderrText)")
    }

    @Test("a second SIGINT during shutdown cuts the 5 s grace short: exit 0 at once, the JSONL log complete and naming the cut")
    func secondSignalEndsGrace() async throws {
        let workdir = try TemporaryDirectory()
        let jsonl = workdir.path + "/flows.jsonl"
        let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--quiet", "--jsonl", jsonl],
                                 directory: workdir.path)
        defer { cli.kill() }
        let first = try #require(await cli.waitForLine { _ in true }, "stderr: \(cli.stderrText)")
        let port = Int(first.split(separator: ":").last ?? "") ?? 0
        try await withOrigin { origin in
            // a download that lasts 60 s: in flight for the whole shutdown
            let url = "\(origin.baseURL)/drip?chunks=600&interval_ms=100&size=10"
            let download = Task { try await CurlCLI.run(["-s", "-o", "/dev/null", "-x", "http://127.0.0.1:\(port)", url],
                                                        timeout: .seconds(30)) }
            defer { download.cancel() }
            #expect(await eventually(timeout: .seconds(10)) { origin.requests.count == 1 })
            cli.signal(SIGINT)
            // the first signal waits for the download up to the grace period (5 s); the second ends it now
            try await Task.sleep(for: .milliseconds(300))
            let second = ContinuousClock.now
            cli.signal(SIGINT)
            let status = await cli.waitForExit(timeout: .seconds(15))
            let took = ContinuousClock.now - second
            #expect(status == 0, "stderr: \(cli.stderrText)")
            // The grace period would end 4.7 s after the second signal: under that, and loose for a loaded machine.
            #expect(took < .milliseconds(4200), "exited \(took) after the second signal (the grace period is 5 s)")
            #expect(cli.stderrText.contains("second signal"), "\(cli.stderrText)")
            let lines = try String(contentsOfFile: jsonl, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 1, "the cut-off download is logged: \(lines)")
            #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil })
            // hookproxy cut it off, not the client: the log says so
            #expect(lines.first?.contains("hookproxy: shut down before the exchange ended") == true, "\(lines)")
        }
    }

    @Test("run --quiet prints the listening line and no exchange lines; SIGINT exits 0")
    func quiet() async throws {
        let workdir = try TemporaryDirectory()
        let cli = try CLIProcess(Self.binary, ["--listen", "127.0.0.1:0", "--quiet"], directory: workdir.path)
        defer { cli.kill() }
        let first = try #require(await cli.waitForLine { _ in true }, "stderr: \(cli.stderrText)")
        #expect(first.hasPrefix("hookproxy listening on http://127.0.0.1:"))
        let port = Int(first.split(separator: ":").last ?? "") ?? 0
        try await withOrigin { origin in
            let result = try await CurlCLI.run(["-s", "-x", "http://127.0.0.1:\(port)", "\(origin.baseURL)/bytes/10"])
            #expect(result.exitCode == 0)
        }
        cli.signal(SIGINT)
        #expect(await cli.waitForExit(timeout: .seconds(10)) == 0)
        #expect(cli.stdoutLines == [first], "--quiet printed: \(cli.stdoutLines)")
    }

    @Test("check --rules with a broken file exits 1 naming file:line:col on stderr")
    func checkBadRules() async throws {
        let directory = try TemporaryDirectory()
        try directory.write("""
            rules:
              - name: fine
                match: { host: example.com }
                respond: { status: 200, body: ok }
              - name: broken
                match: { host: example.com }
                respnd: { status: 200 }

            """, to: "bad.yaml")
        let cli = try CLIProcess(Self.binary, ["check", "--rules", directory.path], directory: directory.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: .seconds(20))
        #expect(status == 1, "stdout: \(cli.stdoutLines) stderr: \(cli.stderrText)")
        let stderr = cli.stderrText
        let located = stderr.range(of: #"bad\.yaml:[0-9]+:[0-9]+: "#, options: .regularExpression) != nil
        #expect(located, "stderr: \(stderr)")
        #expect(!cli.stdoutLines.contains { $0.hasPrefix("ok:") })
    }

    @Test("check --rules rules (the repository's examples) exits 0 with ok:")
    func checkExampleRules() async throws {
        let root = repositoryRoot()
        let cli = try CLIProcess(Self.binary, ["check", "--rules", "rules"], directory: root.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: .seconds(20))
        #expect(status == 0, "stderr: \(cli.stderrText)")
        #expect(cli.stdoutLines.first?.hasPrefix("ok: ") == true, "stdout: \(cli.stdoutLines)")
    }

    /// A duration too large for an `Int` of milliseconds trapped (exit 132) instead of being refused: a review
    /// helper's find.
    @Test("run refuses a bad flag value with a non-zero exit and a message naming the flag", arguments: [
        ("--max-header-bytes", "lots"), ("--header-timeout", "99999999999999999999"),
        ("--idle-timeout", "9223372036854775807ms"), ("--idle-timeout", "101000000m"),
    ])
    func badFlag(flag: String, value: String) async throws {
        let workdir = try TemporaryDirectory()
        let cli = try CLIProcess(Self.binary, ["--listen", "127.0.0.1:0", flag, value], directory: workdir.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: .seconds(20))
        #expect(status != 0 && status != nil && status != 132, "exit \(String(describing: status))")
        #expect(cli.stderrText.contains(flag), "stderr: \(cli.stderrText)")
        #expect(cli.stdoutLines.isEmpty, "stdout: \(cli.stdoutLines)")
    }
}

/// A child process with its stdout split into lines (collected as they arrive) and stderr collected.
/// `kill()` in a `defer` makes sure it never outlives the test.
final class CLIProcess: @unchecked Sendable {
    private let process: ChildProcess
    private let state: CollectedOutput
    private let readers: [Thread]

    init(_ executable: String, _ arguments: [String], directory: String) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw RawClient.Failure("\(executable) missing: run `swift build --build-tests` first")
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        self.process = process
        let state = CollectedOutput()
        self.state = state
        func reader(_ handle: FileHandle, _ append: @escaping @Sendable (Data) -> Void) -> Thread {
            Thread {
                while let bytes = PipeReading.readSome(handle) {  // blocks; nil at end of file
                    append(Data(bytes))
                }
                state.value.withLock { $0.readersDone += 1 }
            }
        }
        readers = [
            reader(out.fileHandleForReading) { data in state.value.withLock { $0.stdout += data } },
            reader(err.fileHandleForReading) { data in state.value.withLock { $0.stderr += data } },
        ]
        try process.run()
        for thread in readers { thread.start() }
    }

    /// Complete stdout lines so far.
    var stdoutLines: [String] {
        let bytes = state.value.withLock { $0.stdout }
        var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\n")
        lines.removeLast()  // the unfinished part (empty when the output ends with a newline)
        return lines
    }

    var stderrText: String { String(decoding: state.value.withLock { $0.stderr }, as: UTF8.self) }

    /// The first stdout line matching `predicate`, waiting at most `timeout`.
    func waitForLine(timeout: Duration = .seconds(20), _ predicate: (String) -> Bool) async -> String? {
        var found: String?
        _ = await eventually(timeout: timeout, interval: .milliseconds(20)) {
            found = stdoutLines.first(where: predicate)
            return found != nil
        }
        return found
    }

    /// The exit status once the process ends within `timeout`, else nil (it is then still running).
    func waitForExit(timeout: Duration) async -> Int32? {
        let ended = await eventually(timeout: timeout, interval: .milliseconds(20)) { !self.process.isRunning }
        guard ended else { return nil }
        process.waitUntilExit()
        // The process has ended, but its last output may still be on the way to the reader threads.
        _ = await eventually(timeout: .seconds(10), interval: .milliseconds(5)) { state.value.withLock { $0.readersDone == 2 } }
        // The reason matters: a signal death is not exit 0.
        return process.terminationReason == .exit ? process.terminationStatus : -process.terminationStatus
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// The process's resident memory now (`VmRSS` of /proc/PID/status), in bytes; nil once it is gone.
    var residentBytes: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kB = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return kB * 1024
    }

    func signal(_ number: Int32) {
        if process.isRunning { Glibc.kill(process.processIdentifier, number) }
    }

    /// SIGKILL if still running, and reap.
    func kill() {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// What a child process wrote so far. Any thread.
final class CollectedOutput: Sendable {
    let value = Mutex<(stdout: [UInt8], stderr: [UInt8], readersDone: Int)>(([], [], 0))
}
