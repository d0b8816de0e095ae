import ArgumentParser
import FoundationEssentials
import Glibc
import ProxyLog
import ProxyModel
import ProxyReplay
import ProxyRules
import ProxyServer
import ProxyUpstream

/// `hookproxy replay FILE.har`: sends the recorded requests again through the rules and upstream, and reports
/// which answers changed.
///
/// The requests go to an in-process proxy on 127.0.0.1:0 in absolute form (`https` URLs too, so the proxy itself
/// makes the TLS connection upstream): every rule and hook applies as under `hookproxy run`.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Send the requests of a HAR file again through the rules and report what changed.",
        discussion: """
            Every request of FILE (method, URL, headers, body) goes through an in-process hookproxy with the given \
            rules, exactly as under `hookproxy run`: map_remote, respond, edits, on_redirect, on_challenge and trust \
            apply, https URLs included. A redirect that hookproxy followed while recording is sent once (its first \
            hop), and compared with the response the client got. Hop-by-hop headers, Host and Content-Length are \
            not replayed as recorded (Host comes from the URL, Content-Length from the body); <redacted> header \
            values are left out.

            Each request prints the recorded status and body size, the new ones, the method and URL, and \
            `status changed`, `size changed` or `failed: …` when it applies; then `N requests, M status changes, \
            K failures`. Exit status: 0 when no status changed and nothing failed, 1 otherwise (or when FILE is not \
            a HAR file), 64 for a usage error.
            """)

    @Argument(help: ArgumentHelp("HAR file to replay (HAR 1.2, e.g. written by `hookproxy run --har`).", valueName: "file.har"))
    var file: String

    @Option(name: .long, help: ArgumentHelp("Rule file or directory (repeatable). Default: ./rules when it exists.", valueName: "path"))
    var rules: [String] = []

    @Option(name: .long, help: ArgumentHelp("Replay only the entries whose URL matches this glob (* also crosses /, ? is one character), e.g. '*/api/*'.", valueName: "glob"))
    var only: String?

    @Option(name: .long, help: ArgumentHelp("Requests in flight at once (the output stays in HAR order).", valueName: "n"))
    var concurrency: Int = 1

    @Option(name: .long, help: ArgumentHelp("Write the replayed exchanges to this HAR file, as `run --har` does.", valueName: "out"))
    var har: String?

    @Option(name: .long, help: ArgumentHelp("An upstream silent this long gets the proxy's 504, and no request takes more than this plus 5s (seconds or 500ms).", valueName: "time"))
    var timeout: String = "60s"

    func validate() throws {
        if concurrency < 1 { throw ValidationError("--concurrency must be at least 1, got \(concurrency)") }
        if let only {
            do throws(URLGlobError) { _ = try URLGlob(only) } catch {
                throw ValidationError("--only '\(only)' is not a glob: \(error.reason)")
            }
        }
        _ = try CommandLineValues.milliseconds(timeout, flag: "--timeout")
        if let har, URL(fileURLWithPath: har).standardizedFileURL == URL(fileURLWithPath: file).standardizedFileURL {
            throw ValidationError("--har \(har) is the file being replayed; write the new exchanges elsewhere")
        }
    }

    func run() async throws {
        var entries: [ReplayEntry]
        do throws(ReplayInputError) {
            entries = try HARReader.load(path: file)
        } catch {
            StandardStreams.error(error.description)
            throw ExitCode(1)
        }
        if let only, let glob = try? URLGlob(only) {
            entries = entries.filter { glob.matches($0.url) }
            if entries.isEmpty { StandardStreams.error("hookproxy: no request in \(file) matches --only '\(only)'") }
        }
        let milliseconds = try CommandLineValues.milliseconds(timeout, flag: "--timeout")
        let server = try await startProxy(timeoutMs: milliseconds)
        // The proxy's own 504 (which names the host) comes first; the client's deadline only ends a response that
        // keeps streaming.
        let client = ReplayClient(host: server.host, port: server.port, timeout: .milliseconds(milliseconds + 5000))
        var report = ReplayReport()
        let results = await Replayer.run(entries, client: client, concurrency: concurrency) { result in
            StandardStreams.output(report.add(result))
        }
        await server.shutdown()
        StandardStreams.output(report.summary)
        let redacted = results.filter { $0.entry.disposition == .send && !$0.entry.redactedHeaders.isEmpty }
        if !redacted.isEmpty {
            let names = Set(redacted.flatMap(\.entry.redactedHeaders)).sorted().joined(separator: ", ")
            StandardStreams.error("hookproxy: \(redacted.count) of the requests were sent without their redacted headers (\(names)); record with --log-secrets to replay them")
        }
        if report.exitCode != 0 { throw ExitCode(report.exitCode) }
    }

    /// The in-process proxy the requests go through: the rules, `--har OUT`, nothing on the console.
    private func startProxy(timeoutMs: Int) async throws -> ProxyServer {
        var recorder: (any FlowRecorder)?
        do {
            if let har { recorder = try HARWriter(path: har, creatorVersion: HookproxyVersion.current) }
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
        let upstream = UpstreamSettings(connectTimeoutMs: min(10_000, timeoutMs), idleTimeoutMs: timeoutMs)
        var configuration = ProxyConfiguration(
            host: "127.0.0.1", port: 0, upstream: upstream, rules: try loadRules(), recorder: recorder,
            captureBodies: har != nil, logger: CommandLineValues.makeLogger(quiet: true, verbose: false))
        configuration.eventLoops = max(1, min(ProcessInfo.processInfo.activeProcessorCount, concurrency))
        // Every request in flight is a connection to this proxy: at the default limit (1024), a higher
        // --concurrency had its own requests refused (503).
        configuration.limits.maxConnections = max(configuration.limits.maxConnections, min(concurrency, 1_000_000))
        do {
            return try await ProxyServer.start(configuration)
        } catch {
            recorder?.close()
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
    }

    private func loadRules() throws -> RuleStore? {
        var paths = rules
        if paths.isEmpty {
            guard FileManager.default.fileExists(atPath: "rules") else { return nil }
            paths = ["rules"]
        }
        do {
            let store = try RuleStore(paths: paths)
            for warning in store.current.warnings { StandardStreams.error("\(warning)") }
            return store
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
    }
}
