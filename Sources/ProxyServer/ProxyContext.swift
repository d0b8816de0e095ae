import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ProxyModel
import ProxyRules
import ProxyUpstream
import Synchronization

/// What every connection of one running proxy shares: configuration, the upstream engine, counters.
/// Thread-safe; created once by `ProxyServer.start`.
final class ProxyContext: Sendable {
    let configuration: ProxyConfiguration
    let engine: UpstreamEngine
    let connections: ConnectionTracker
    /// Runs whole-body transforms, so a slow regex never stalls an event loop.
    let transformPool: LazyThreadPool
    /// Runs the blocking connects of CONNECT tunnels through `--upstream-proxy`: a dead host holds one of these
    /// threads up to --connect-timeout, never a transform's or a leaf signing's.
    let connectPool: LazyThreadPool
    /// Signs interception leaves.
    let signingPool: LazyThreadPool
    private let nextFlowID = Atomic<Int>(1)
    /// The interception CA (created on first need) and the per-host TLS contexts it signs.
    let certificateAuthority: LazyCertificateAuthority
    let interception: InterceptionContexts
    /// Hosts whose clients refused hookproxy's certificate, and hosts told that trust cannot apply to a tunnel.
    let interceptionRefusals = Mutex<[String]>([])
    let blindTunnelTrustWarnings = Mutex<Set<String>>([])
    /// The real listening address, known once bound (host lower-cased); read on every request, so lock-free.
    let listeningPort = Atomic<Int>(0)
    let listeningHost: String
    /// The `Via` value hookproxy adds to a request whose target port is its own listening port: a request arriving
    /// with it came back through this very proxy (a DNS name or an address spelling that points at the listener),
    /// and is answered 508 instead of looping until --max-connections.
    let loopMarker = "1.1 hookproxy-" + String(UInt64.random(in: 1...UInt64.max), radix: 36)

    /// The traffic viewer, unless `--no-ui` (its store is also one of `configuration.recorder`'s recorders).
    let viewer: Viewer?
    /// What HTTP/2 upstream transfers hold, together, for slow clients.
    let multiplexedBacklog: MultiplexedBacklog

    init(configuration: ProxyConfiguration, viewer: Viewer? = nil) {
        self.configuration = configuration
        self.viewer = viewer
        self.listeningHost = configuration.host.lowercased()
        self.engine = UpstreamEngine(settings: configuration.upstream)
        self.connections = ConnectionTracker(limit: configuration.limits.maxConnections)
        self.multiplexedBacklog = MultiplexedBacklog(limit: configuration.limits.multiplexedBacklogLimit,
                                                     streamLimit: configuration.limits.multiplexedStreamLimit)
        self.transformPool = LazyThreadPool(numberOfThreads: 2)
        self.connectPool = LazyThreadPool(numberOfThreads: 8)
        self.signingPool = LazyThreadPool(numberOfThreads: 2)
        self.certificateAuthority = LazyCertificateAuthority(directory: configuration.caDirectory)
        self.interception = InterceptionContexts(ca: certificateAuthority, pool: signingPool)
    }

    var logger: Logger { configuration.logger }

    /// Where hookproxy itself listens, once bound.
    var listeningAddress: (host: String, port: Int)? {
        let port = listeningPort.load(ordering: .relaxed)
        return port == 0 ? nil : (listeningHost, port)
    }
    var limits: ProxyLimits { configuration.limits }

    /// How many refusing hosts are remembered (and listed at shutdown).
    static let maxRefusalsKept = 256

    func makeFlowID() -> Int {
        nextFlowID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// The rule snapshot for a new flow.
    var currentRules: RuleSet { configuration.rules?.current ?? .empty }

    /// Whether a CONNECT to host:port is intercepted: a matching rule's `intercept` decides first, then `--intercept`.
    func intercepts(host: String, port: Int) -> Bool {
        if let decision = currentRules.intercept(host: host, port: port) { return decision }
        return configuration.interceptHosts.contains { $0.matches(host) }
    }

    /// Logs the first refusal per host; the list is summarised at shutdown.
    func clientRefusedInterception(host: String) {
        let first = interceptionRefusals.withLock { hosts -> Bool in
            // bounded: a client refusing many hosts (or a scan) cannot grow it without end
            guard hosts.count < ProxyContext.maxRefusalsKept, !hosts.contains(host) else { return false }
            hosts.append(host)
            return true
        }
        if first {
            logger.warning("client rejected hookproxy's certificate for \(host) — it may pin its server certificate, or not trust the CA (hookproxy ca path)")
        }
    }

    /// Stops the thread pools (transforms, connects, signing). A blocking connect may hold its thread up to
    /// --connect-timeout: that pool is told to stop but not waited for, so shutdown keeps its grace period.
    func shutdownPools() async throws {
        try await connectPool.shutdown(wait: false)
        try await transformPool.shutdown()
        try await signingPool.shutdown()
    }

    /// The ports of the `--reverse` listeners, known once bound: a request to one of them may come back too.
    private let reversePorts = Mutex<Set<Int>>([])

    func addOwnPort(_ port: Int) {
        reversePorts.withLock { _ = $0.insert(port) }
    }

    /// Whether `port` is one of hookproxy's listening ports (the proxy's, a reverse route's).
    func isOwnPort(_ port: Int) -> Bool {
        port == listeningPort.load(ordering: .relaxed) || reversePorts.withLock { $0.contains(port) }
    }

    /// Marks `head` when it may come back to one of hookproxy's listeners (its port is a listening port).
    func markIfItMayLoop(_ head: inout RequestHead) {
        guard isOwnPort(head.url.port) else { return }
        head.headers.add("Via", loopMarker)
    }

    func record(_ flow: FlowRecord) {
        configuration.recorder?.record(flow)
    }

    /// An exchange began (the viewer shows it as pending); its hop-0 record will carry `flow.id`.
    func started(_ flow: FlowRecord) {
        configuration.recorder?.started(flow)
    }
}

/// Counts open client connections and in-flight exchanges; holds the channels so shutdown can close them. A
/// connection closing lingering (`LingeringClose`: its answer sent, only waiting for its peer to take the last bytes
/// or to close) keeps its slot only while nobody else needs it: at the limit, a new connection takes the slot of one
/// of those, which closes at once, rather than being refused.
final class ConnectionTracker: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        /// The channels closing lingering, among `channels`.
        var lingering: [ObjectIdentifier: any Channel] = [:]
        var exchanges = 0
        /// Refusals not yet reported, and when the last report went out.
        var refusedSinceReport = 0
        var lastReport: NIODeadline?
        var reportScheduled = false
    }
    private let state = Mutex(State())
    let limit: Int
    /// At most one refusal warning per interval: a flood of refused clients is one line a second, with a count.
    static let reportInterval = TimeAmount.seconds(1)

    init(limit: Int) { self.limit = limit }

    /// Registers a new connection; false when the limit is reached and no lingering connection can give up its slot
    /// (the caller answers 503 and closes).
    func admit(_ channel: any Channel) -> Bool {
        let (admitted, yielding) = state.withLock { state -> (Bool, (any Channel)?) in
            var yielding: (any Channel)?
            if state.channels.count >= limit {
                guard let (id, lingering) = state.lingering.first else {
                    state.refusedSinceReport += 1
                    return (false, nil)
                }
                state.lingering.removeValue(forKey: id)
                state.channels.removeValue(forKey: id)
                yielding = lingering
            }
            state.channels[ObjectIdentifier(channel)] = channel
            return (true, yielding)
        }
        yielding?.close(promise: nil)
        return admitted
    }

    /// `channel` closes lingering from now on: its slot may go to a new connection (`admit`).
    func noteLingering(_ channel: any Channel) {
        state.withLock { state in
            let id = ObjectIdentifier(channel)
            if state.channels[id] != nil { state.lingering[id] = channel }
        }
    }

    /// The refusals to report now (the first one at once, then at most one report per `reportInterval`), or nil.
    func refusalsToReport(now: NIODeadline = .now()) -> Int? {
        state.withLock { state in
            guard state.refusedSinceReport > 0 else { return nil }
            if let last = state.lastReport, now - last < Self.reportInterval { return nil }
            defer { state.refusedSinceReport = 0 }
            state.lastReport = now
            state.reportScheduled = false
            return state.refusedSinceReport
        }
    }

    /// True for the one caller that should report the refusals held back, after `reportInterval` (until then,
    /// false for everyone else).
    func claimLaterReport() -> Bool {
        state.withLock { state in
            guard !state.reportScheduled else { return false }
            state.reportScheduled = true
            return true
        }
    }

    func remove(_ channel: any Channel) {
        state.withLock { state in
            state.channels.removeValue(forKey: ObjectIdentifier(channel))
            state.lingering.removeValue(forKey: ObjectIdentifier(channel))
        }
    }

    func exchangeStarted() { state.withLock { $0.exchanges += 1 } }
    func exchangeEnded() { state.withLock { $0.exchanges -= 1 } }

    var exchangesInFlight: Int { state.withLock { $0.exchanges } }
    var openChannels: [any Channel] { state.withLock { Array($0.channels.values) } }

    /// Set by `ProxyServer.shutdown` when the grace period is over, before it closes what is still open: an exchange
    /// cut off then is logged as hookproxy's doing, not as the client leaving.
    private let cutOff = Atomic<Bool>(false)
    func cutOffForShutdown() { cutOff.store(true, ordering: .relaxed) }
    var cutOffByShutdown: Bool { cutOff.load(ordering: .relaxed) }
    /// What such an exchange's log says.
    static let shutdownCutOff = "shut down before the exchange ended (the shutdown grace period was over)"
}
