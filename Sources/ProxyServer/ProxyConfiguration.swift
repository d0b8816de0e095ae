import FoundationEssentials
import Glibc
import Logging
import NIOCore
import ProxyLog
import ProxyModel
import ProxyRules
import ProxyUpstream

/// Limits from the command line (SPEC.md "Details").
public struct ProxyLimits: Sendable, Hashable {
    public var maxHeaderBytes: Int
    public var maxConnections: Int
    /// Buffering for body transforms, redirect replay and challenge replay.
    public var bodyLimit: Int
    /// How much of each body the traffic log keeps.
    public var captureLimit: Int
    /// How long shutdown waits for exchanges in flight, in milliseconds.
    public var shutdownGraceMs: Int
    /// `--header-timeout`: a client connection waiting for a request (a new one, one between keep-alive requests, an
    /// intercepted tunnel's TLS handshake) must deliver a complete request head within this, or it is closed.
    public var headerTimeoutMs: Int
    /// `--idle-timeout` on the client side: a client that sends nothing while its request body is due, or reads
    /// nothing while a response waits for it, for this long is disconnected (its upstream transfer cancelled).
    public var clientIdleTimeoutMs: Int
    /// What HTTP/2 upstream responses may hold, all together, for clients that read them slowly (`MultiplexedBacklog`).
    public var multiplexedBacklogLimit: Int
    /// What one such response may hold for its client while its connection may carry other transfers (16 MiB).
    public var multiplexedStreamLimit: Int

    public init(maxHeaderBytes: Int = 64 * 1024, maxConnections: Int = 1024, bodyLimit: Int = 16 * 1024 * 1024,
                captureLimit: Int = 1024 * 1024, shutdownGraceMs: Int = 5000, headerTimeoutMs: Int = 30_000,
                clientIdleTimeoutMs: Int = 60_000, multiplexedBacklogLimit: Int = 256 * 1024 * 1024,
                multiplexedStreamLimit: Int = 16 * 1024 * 1024) {
        self.multiplexedBacklogLimit = multiplexedBacklogLimit
        self.multiplexedStreamLimit = multiplexedStreamLimit
        self.maxHeaderBytes = maxHeaderBytes
        self.maxConnections = maxConnections
        self.bodyLimit = bodyLimit
        self.captureLimit = captureLimit
        self.shutdownGraceMs = shutdownGraceMs
        self.headerTimeoutMs = headerTimeoutMs
        self.clientIdleTimeoutMs = clientIdleTimeoutMs
    }
}

/// `--proxy-auth USER:PASS`: Basic credentials every client must present.
public struct ProxyCredentials: Sendable, Hashable {
    public var user: String
    public var password: String
    public init(user: String, password: String) { self.user = user; self.password = password }

    /// Parses `USER:PASS`; nil when there is no colon or the user is empty.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return nil }
        self.init(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
    }
}

/// Everything a running proxy needs; built by the CLI (or a test harness).
public struct ProxyConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var limits: ProxyLimits
    public var upstream: UpstreamSettings
    public var proxyAuth: ProxyCredentials?
    public var rules: RuleStore?
    /// Where finished exchanges go (console, JSONL, HAR); nil records nothing.
    public var recorder: (any FlowRecorder)?
    /// Whether bodies are captured for the recorder (only the file logs need them).
    public var captureBodies: Bool
    /// `--intercept GLOB`: CONNECT hosts whose TLS hookproxy terminates (rules with `intercept` decide first).
    public var interceptHosts: [HostGlob] = []
    /// How many event loops (threads) serve client connections, each with its own upstream connection cache.
    public var eventLoops: Int = System.coreCount
    /// `--ca-dir`: where the interception CA lives (created on first need).
    public var caDirectory: String = ProxyConfiguration.defaultCADirectory
    /// `--reverse LISTEN=URL`: listeners of their own that stand where URL's server stands (see `ReverseRoute`).
    public var reverseRoutes: [ReverseRoute] = []
    /// `--reverse-cert FILE`: what TLS reverse listeners present instead of a leaf minted by the CA
    /// (see `ReverseCertificate` for what the file holds).
    public var reverseCertificatePath: String?
    /// `--throttle`: the slow network every upstream exchange goes through; a rule's `throttle` wins per field.
    public var throttle: Throttle?
    /// The traffic viewer on the listen address (`hookproxy run` turns it on unless `--no-ui`); nil: off, the
    /// small onboarding page and `/ca.pem` only.
    public var viewer: ViewerSettings?

    public static var defaultCADirectory: String {
        PathText.appending(".hookproxy", to: PathText.homeDirectory)
    }
    public var logger: Logger

    public init(host: String = "127.0.0.1", port: Int = 8080, limits: ProxyLimits = ProxyLimits(),
                upstream: UpstreamSettings = UpstreamSettings(), proxyAuth: ProxyCredentials? = nil,
                rules: RuleStore? = nil, recorder: (any FlowRecorder)? = nil, captureBodies: Bool = false,
                logger: Logger = Logger(label: "hookproxy")) {
        self.host = host
        self.port = port
        self.limits = limits
        self.upstream = upstream
        self.proxyAuth = proxyAuth
        self.rules = rules
        self.recorder = recorder
        self.captureBodies = captureBodies
        self.logger = logger
    }
}
