internal import CCurl
import NIOCore
import ProxyModel
import Synchronization

/// Carries every upstream request with libcurl, on the event loop of the client connection that asked for it.
///
/// Each event loop gets its own curl multi handle (`LoopEngine`), driven through curl's socket API on that loop's
/// thread: a request, its curl transfer and the delegate's callbacks never change thread. Upstream connections
/// (and DNS answers) are cached per loop and reused by every client connection served there. A loop that sleeps
/// is woken by the kernel through its own selector (`LoopSetAlarm`); one `SocketWatcher` thread does it instead
/// where the kernel refuses that.
public final class UpstreamEngine: Sendable {
    public let settings: UpstreamSettings
    let watcher = SocketWatcher()
    private let loops = Mutex<[ObjectIdentifier: LoopEngine]>([:])
    private let nextTransferID = Atomic<UInt64>(1)
    private let isRunning = Atomic<Bool>(true)
    private let counter = UpstreamStatisticsCounter()

    private static let globalInit: Void = {
        _ = curl_global_init(hp_global_default())
    }()

    public init(settings: UpstreamSettings = UpstreamSettings()) {
        _ = UpstreamEngine.globalInit
        self.settings = settings
    }

    /// Starts carrying `request` on `loop`; the delegate hears about it on that loop. Any thread (the transfer
    /// starts at once when called on `loop`, else as its next task).
    public func start(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate,
                      on loop: any EventLoop) -> UpstreamTransfer {
        let id = nextTransferID.wrappingAdd(1, ordering: .relaxed).oldValue
        guard let engine = loopEngine(for: loop) else {
            return Self.refuse(request, id: id, on: loop) { delegate.didComplete(UpstreamOutcome(error: $0)) }
        }
        let transfer = CurlTransfer(id: id, request: request, delegate: delegate)
        engine.perform { $0.add(transfer) }
        return UpstreamTransfer(id: id, engine: engine)
    }

    /// Opens a connection for `request` (its `connectOnly` is set here) the way a transfer would (DNS,
    /// `--upstream-proxy`, TLS judged by `trust`) and hands it over, unused, to `delegate` on `loop`: the caller
    /// speaks the protocol itself. Any thread. Cancelling the returned transfer before it connects ends it silently.
    public func connect(_ request: UpstreamRequest, delegate: any UpstreamConnectionDelegate,
                        on loop: any EventLoop) -> UpstreamTransfer {
        var request = request
        request.connectOnly = true
        request.body = .none
        let id = nextTransferID.wrappingAdd(1, ordering: .relaxed).oldValue
        let failure = ConnectOnlyDelegate(delegate)
        guard let engine = loopEngine(for: loop) else {
            return Self.refuse(request, id: id, on: loop) { failure.didComplete(UpstreamOutcome(error: $0)) }
        }
        let transfer = CurlTransfer(id: id, request: request, delegate: failure)
        transfer.connectionDelegate = delegate
        engine.perform { $0.add(transfer) }
        return UpstreamTransfer(id: id, engine: engine)
    }

    /// The idle upstream connections the loops watch now, by socket (tests: each must still be one curl holds).
    func idleWatchedSockets() async -> [Int32] {
        var all: [Int32] = []
        for engine in loops.withLock({ Array($0.values) }) {
            all += (try? await engine.loop.submit { Array(engine.idleWatched) }.get()) ?? []
        }
        return all
    }

    /// Tests: makes every loop's kernel alarm fail from now on, as if the kernel stopped taking AIO polls; how many
    /// loops had one.
    func failAlarmsForTesting() async -> Int {
        var failed = 0
        for engine in loops.withLock({ Array($0.values) }) {
            if (try? await engine.loop.submit { engine.failAlarmForTesting() }.get()) == true { failed += 1 }
        }
        return failed
    }

    /// How many transfers finished, and how many upstream connections they had to open.
    public var statistics: UpstreamStatistics { counter.snapshot }

    /// Aborts every transfer still running (each hears a shutdown error) and returns at once. Any thread.
    public func stop() {
        guard isRunning.exchange(false, ordering: .acquiringAndReleasing) else { return }
        for engine in loops.withLock({ Array($0.values) }) {
            engine.perform { $0.stop() }
        }
        watcher.stop()
    }

    /// Stops like `stop`, and returns once every loop's multi handle is freed and the watcher thread has ended.
    /// Call before the event loops shut down. Any task; call once or more.
    public func shutdown() async {
        let wasRunning = isRunning.exchange(false, ordering: .acquiringAndReleasing)
        if wasRunning {
            for engine in loops.withLock({ Array($0.values) }) {
                try? await engine.loop.submit { engine.stop() }.get()
            }
        }
        await watcher.shutdown()
    }

    /// Sets up each loop's multi handle now, while descriptors are free, rather than at the loop's first request.
    /// Throws when one cannot be set up (the process is out of file descriptors).
    public func prepare(_ loops: [any EventLoop]) throws(ProxyError) {
        for loop in loops where loopEngine(for: loop) == nil {
            throw ProxyError(.upstreamFailed, "hookproxy: cannot set up the upstream engine: out of file descriptors (ulimit -n)")
        }
    }

    /// The loop's engine, made on first use; nil while it cannot be made (no descriptor for its socket set). A
    /// later call tries again.
    private func loopEngine(for loop: any EventLoop) -> LoopEngine? {
        loops.withLock { loops in
            if let engine = loops[ObjectIdentifier(loop)] { return engine }
            guard let engine = LoopEngine(loop: loop, settings: settings, watcher: watcher, statistics: counter) else {
                return nil
            }
            loops[ObjectIdentifier(loop)] = engine
            if !isRunning.load(ordering: .acquiring) { engine.perform { $0.stop() } }
            return engine
        }
    }

    /// A request that cannot start: `fail` hears why on `loop` (at once when called there, as a curl failure
    /// would), and the returned handle reaches nothing.
    private static func refuse(_ request: UpstreamRequest, id: UInt64, on loop: any EventLoop,
                               _ fail: @escaping @Sendable (ProxyError) -> Void) -> UpstreamTransfer {
        let error = ProxyError(.upstreamFailed, "hookproxy: cannot reach \(request.head.url.authority): out of file "
                               + "descriptors (see ulimit -n and --max-connections)")
        if loop.inEventLoop { fail(error) } else { loop.execute { fail(error) } }
        return UpstreamTransfer(id: id, engine: nil)
    }

    static func shuttingDown(_ host: String) -> ProxyError {
        ProxyError(.upstreamFailed, "hookproxy: shutting down \(host)")
    }
}

/// Transfers finished, the upstream connections they opened, and those that never had one (the server or the
/// upstream proxy could not be reached, or the transfer was cancelled first): the rest reused a cached connection.
public struct UpstreamStatistics: Sendable, Hashable {
    public var transfers: Int
    public var newConnections: Int
    /// Transfers that ended without a connection, new or reused.
    public var unconnected: Int
    /// Upstream sockets found ready, and how many times a sleeping loop had to be woken for one: the rest were
    /// found by a busy loop's own polls.
    public var readySockets: Int
    public var wakeups: Int
    /// The wake-ups the watcher thread made (a hop to the loop each); the rest came through the loop's own
    /// selector (`LoopSetAlarm`).
    public var threadWakeups: Int

    public init(transfers: Int, newConnections: Int, unconnected: Int = 0, readySockets: Int = 0, wakeups: Int = 0,
                threadWakeups: Int = 0) {
        self.transfers = transfers
        self.newConnections = newConnections
        self.unconnected = unconnected
        self.readySockets = readySockets
        self.wakeups = wakeups
        self.threadWakeups = threadWakeups
    }

    /// The share of the transfers that had a connection which found one ready, 0…1 (0 when none had one).
    public var reuseRate: Double {
        let connected = transfers - unconnected
        return connected <= 0 ? 0 : Double(max(0, connected - newConnections)) / Double(connected)
    }
}

/// The engine's running totals (any loop adds to them).
final class UpstreamStatisticsCounter: Sendable {
    private let transfers = Atomic<Int>(0)
    private let newConnections = Atomic<Int>(0)
    private let unconnected = Atomic<Int>(0)
    private let readySockets = Atomic<Int>(0)
    private let wakeups = Atomic<Int>(0)
    private let threadWakeups = Atomic<Int>(0)

    /// One finished transfer: the connections it opened, or (none) whether it got a reused one at all.
    func count(newConnections connections: Int, connected: Bool) {
        transfers.wrappingAdd(1, ordering: .relaxed)
        if connections > 0 {
            newConnections.wrappingAdd(connections, ordering: .relaxed)
        } else if !connected {
            unconnected.wrappingAdd(1, ordering: .relaxed)
        }
    }

    func count(readySockets count: Int) {
        readySockets.wrappingAdd(count, ordering: .relaxed)
    }

    func countWakeup(byThread: Bool) {
        wakeups.wrappingAdd(1, ordering: .relaxed)
        if byThread { threadWakeups.wrappingAdd(1, ordering: .relaxed) }
    }

    var snapshot: UpstreamStatistics {
        UpstreamStatistics(
            transfers: transfers.load(ordering: .relaxed), newConnections: newConnections.load(ordering: .relaxed),
            unconnected: unconnected.load(ordering: .relaxed), readySockets: readySockets.load(ordering: .relaxed),
            wakeups: wakeups.load(ordering: .relaxed), threadWakeups: threadWakeups.load(ordering: .relaxed))
    }
}
