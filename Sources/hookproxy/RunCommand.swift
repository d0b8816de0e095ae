import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import ProxyLog
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyUI
import ProxyUpstream

/// `hookproxy run`: listens, applies the rules, logs every exchange, stops cleanly on SIGINT/SIGTERM.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the proxy (the default).")

    @Option(name: .long, help: "Address to listen on, HOST:PORT (port 0 picks a free port).")
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: "Rule file or directory (repeatable). Default: ./rules when it exists.")
    var rules: [String] = []

    @Option(name: .long, help: "Require Basic proxy credentials USER:PASS from every client (CONNECT included).")
    var proxyAuth: String?

    @Option(name: .long, help: "Intercept TLS of CONNECT tunnels to hosts matching this glob (repeatable).")
    var intercept: [String] = []

    @Option(name: .long, help: "Directory of the interception CA (default ~/.hookproxy).")
    var caDir: String?

    @Option(name: .long, help: ArgumentHelp(
        "Also listen on LISTEN as the server of URL would, and forward every request there to URL (scheme, host, port, path prefix) with Host rewritten; rules, hooks and logs apply as for proxied requests (repeatable). LISTEN is HOST:PORT, with TLS when URL is https; prefix it with http:// or https:// to choose, e.g. 127.0.0.1:9443=https://api.example.com or http://127.0.0.1:9000=https://api.example.com.",
        valueName: "listen=url"))
    var reverse: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "PEM file that TLS --reverse listeners present instead of a leaf minted by the CA: the server certificate first, then any intermediates, and its unencrypted private key.",
        valueName: "file"))
    var reverseCert: String?

    @Option(name: .long, help: "Send all upstream traffic (CONNECT tunnels included) through this HTTP proxy; credentials in its userinfo answer its 407.")
    var upstreamProxy: String?

    @Flag(name: .customLong("upstream-http1"), help: "Speak HTTP/1.1 to every upstream (by default libcurl negotiates HTTP/2 with TLS origins that offer it, and multiplexes requests on one connection).")
    var upstreamHTTP1 = false

    @Flag(name: .long, help: "Print no exchange lines (warnings and errors still go to stderr).")
    var quiet = false

    @Flag(name: .long, help: "Add headers and hook details to the log.")
    var verbose = false

    @Option(name: .long, help: "Largest request head accepted (bytes or 64KiB); larger gets 431.")
    var maxHeaderBytes: String = "64KiB"

    @Option(name: .long, help: "Most client connections at once; more get 503.")
    var maxConnections: Int = 1024

    @Option(name: .long, help: "Write every exchange to FILE as HAR 1.2 (valid JSON after every entry).")
    var har: String?

    @Option(name: .long, help: "Write every exchange to FILE as one JSON object per line.")
    var jsonl: String?

    @Flag(name: .long, help: "Log Authorization, Cookie and Set-Cookie values instead of <redacted>.")
    var logSecrets = false

    @Option(name: .long, help: "Redact this query parameter in logged URLs (repeatable).")
    var redactQuery: [String] = []

    @Option(name: .long, help: "How much of each body the HAR/JSONL logs keep (bytes or 1MiB).")
    var captureLimit: String = "1MiB"

    @Option(name: .long, help: "Most bytes buffered for body transforms, redirect and challenge replays (16MiB).")
    var bodyLimit: String = "16MiB"

    @Option(name: .long, help: "Upstream connect timeout (seconds or 500ms).")
    var connectTimeout: String = "10s"

    @Option(name: .long, help: "Idle timeout: no bytes either way for this long ends the exchange (504 from a silent upstream; a client that stops sending or reading is disconnected).")
    var idleTimeout: String = "60s"

    @Option(name: .long, help: "A client connection must send a complete request head (TLS handshake included) within this (30s).")
    var headerTimeout: String = "30s"

    @Option(name: .long, help: ArgumentHelp("Check upstream certificate dates at this UTC instant instead of now, e.g. 2031-01-01T00:00:00Z (a trust rule's verify_time wins).", valueName: "time"))
    var verifyTime: String?

    @Option(name: .long, help: ArgumentHelp(
        "Imitate a slow network on every upstream exchange: a preset (3g, slow-3g, edge) or down=KBPS,up=KBPS,latency=MS (any of them; 1 kbps = 1000 bit/s; 0 kbps = unlimited). Bandwidth is shaped on the response and request body streams, latency holds each request before it goes upstream. A rule's throttle wins per field.",
        valueName: "preset|spec"))
    var throttle: String?

    @Flag(name: .long, help: "Turn off the traffic viewer on the listen address (the small page and /ca.pem stay; /api/* answers 404).")
    var noUi = false

    @Option(name: .long, help: "How many exchanges the traffic viewer keeps (the oldest go first).")
    var uiFlows: Int = 5000

    func validate() throws {
        if quiet && verbose { throw ValidationError("--quiet and --verbose exclude each other") }
        _ = try CommandLineValues.listenAddress(listen)
        _ = try CommandLineValues.bytes(maxHeaderBytes, flag: "--max-header-bytes")
        _ = try CommandLineValues.bytes(captureLimit, flag: "--capture-limit")
        _ = try CommandLineValues.bytes(bodyLimit, flag: "--body-limit")
        _ = try CommandLineValues.milliseconds(connectTimeout, flag: "--connect-timeout")
        _ = try CommandLineValues.milliseconds(idleTimeout, flag: "--idle-timeout")
        _ = try CommandLineValues.milliseconds(headerTimeout, flag: "--header-timeout")
        if let verifyTime { _ = try CommandLineValues.instant(verifyTime, flag: "--verify-time") }
        if let throttle { _ = try CommandLineValues.throttle(throttle) }
        for glob in intercept where HostGlob(glob) == nil {
            throw ValidationError("--intercept takes a host glob such as '*.example.com', got '\(glob)'")
        }
        if uiFlows < 1 || uiFlows > FlowStore.Limits.mostFlows {
            throw ValidationError("--ui-flows must be between 1 and \(FlowStore.Limits.mostFlows) (got \(uiFlows))")
        }
        if maxConnections < 1 { throw ValidationError("--max-connections must be at least 1") }
        if let har, let jsonl, URL(fileURLWithPath: har).standardizedFileURL == URL(fileURLWithPath: jsonl).standardizedFileURL {
            // (Each writer locks its file: the second lock read as "being written by another hookproxy".)
            throw ValidationError("--har and --jsonl name the same file (\(har)); give each log a file of its own")
        }
        if let upstreamProxy, !(upstreamProxy.hasPrefix("http://") || upstreamProxy.hasPrefix("https://")) {
            throw ValidationError("--upstream-proxy must be an http:// or https:// URL, e.g. http://user:pass@proxy:3128")
        }
        if let proxyAuth, ProxyCredentials(proxyAuth) == nil {
            throw ValidationError("--proxy-auth must be USER:PASS")
        }
        let routes = try CommandLineValues.reverseRoutes(reverse)
        if reverseCert != nil && !routes.contains(where: \.tls) {
            throw ValidationError("--reverse-cert is what TLS --reverse listeners present, and no --reverse listener speaks TLS (give an https URL or an https:// listen address)")
        }
    }

    func run() async throws {
        let (host, port) = try CommandLineValues.listenAddress(listen)
        let logger = CommandLineValues.makeLogger(quiet: quiet, verbose: verbose)
        let ruleStore = try loadRules(logger: logger)

        var limits = ProxyLimits()
        limits.maxHeaderBytes = try CommandLineValues.bytes(maxHeaderBytes, flag: "--max-header-bytes")
        limits.maxConnections = maxConnections
        limits.captureLimit = try CommandLineValues.bytes(captureLimit, flag: "--capture-limit")
        limits.bodyLimit = try CommandLineValues.bytes(bodyLimit, flag: "--body-limit")
        limits.headerTimeoutMs = try CommandLineValues.milliseconds(headerTimeout, flag: "--header-timeout")
        limits.clientIdleTimeoutMs = try CommandLineValues.milliseconds(idleTimeout, flag: "--idle-timeout")
        let upstream = UpstreamSettings(
            connectTimeoutMs: try CommandLineValues.milliseconds(connectTimeout, flag: "--connect-timeout"),
            idleTimeoutMs: try CommandLineValues.milliseconds(idleTimeout, flag: "--idle-timeout"),
            upstreamProxy: upstreamProxy,
            http2: !upstreamHTTP1,
            verifyTime: try verifyTime.map { try CommandLineValues.instant($0, flag: "--verify-time") })
        let redactor = Redactor(logSecrets: logSecrets, redactQuery: redactQuery)
        var recorders: [any FlowRecorder] = quiet ? [] : [ConsoleLog(verbose: verbose, redactor: redactor)]
        do {
            if let jsonl { recorders.append(try JSONLWriter(path: jsonl, redactor: redactor)) }
            if let har { recorders.append(try HARWriter(path: har, creatorVersion: HookproxyVersion.current, redactor: redactor)) }
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }

        var configuration = ProxyConfiguration(
            host: host, port: port, limits: limits, upstream: upstream,
            proxyAuth: proxyAuth.flatMap(ProxyCredentials.init), rules: ruleStore,
            recorder: recorders.isEmpty ? nil : MultiRecorder(recorders), captureBodies: har != nil || jsonl != nil,
            logger: logger)
        configuration.interceptHosts = intercept.compactMap(HostGlob.init)
        if let caDir { configuration.caDirectory = caDir }
        configuration.reverseRoutes = try CommandLineValues.reverseRoutes(reverse)
        configuration.reverseCertificatePath = reverseCert
        configuration.throttle = try throttle.map(CommandLineValues.throttle)
        if !noUi { configuration.viewer = ViewerSettings(limits: FlowStore.Limits(maxFlows: uiFlows), redactor: redactor) }
        let termination = SignalWaiter.install()
        let server: ProxyServer
        do {
            server = try await ProxyServer.start(configuration)
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
        StandardStreams.output("hookproxy listening on \(server.url)")
        if !noUi { logger.info("traffic viewer: \(server.url)/ (--no-ui turns it off)") }
        for listener in server.reverseListeners {
            StandardStreams.output(listener.startLine)
            if !CommandLineValues.isLoopback(listener.host) {
                StandardStreams.error("hookproxy: warning: reverse listener on \(listener.host) (no --proxy-auth there): anyone who can reach this address reaches \(listener.route.target)")
            }
        }
        if proxyAuth == nil && !CommandLineValues.isLoopback(host) {
            StandardStreams.error("hookproxy: warning: listening on \(host) without --proxy-auth: anyone who can reach this address can use it as an open proxy")
        }
        await termination.wait()
        let hurry = Task {
            await termination.waitForSecond()
            guard !Task.isCancelled else { return }
            logger.warning("second signal: ending the shutdown grace period now, in-flight exchanges are cut off")
            server.endGracePeriod()
        }
        await server.shutdown()
        hurry.cancel()
    }

    private func loadRules(logger: Logger) throws -> RuleStore? {
        var paths = rules
        if paths.isEmpty {
            var isDirectory = false
            guard FileManager.default.fileExists(atPath: "rules", isDirectory: &isDirectory) else { return nil }
            paths = ["rules"]
        }
        let store: RuleStore
        do {
            store = try RuleStore(paths: paths)
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
        for warning in store.current.warnings { StandardStreams.error("\(warning)") }
        logger.info("rules: \(store.current.summary.dropFirst(4)) from \(paths.joined(separator: ", "))")
        store.startWatching { result in
            switch result {
            case .success(let rules):
                for warning in rules.warnings { StandardStreams.error("\(warning)") }
                logger.info("rules reloaded: \(rules.summary.dropFirst(4))")
            case .failure(let failure):
                logger.error("rules not reloaded, the previous rules stay in force:\n\(failure)")
            }
        }
        return store
    }
}
