import ProxyModel
import Synchronization

/// The traffic viewer's memory: the last `limits.maxFlows` exchanges (one per log record, pending ones included),
/// their captured bodies counted against `limits.maxBytes`; the oldest go first when either is exceeded.
///
/// Fed like every log writer (`FlowRecorder`): `started` when an exchange begins (a pending flow), `record` when its
/// record is made (the flow is done). Thread-safe: every call takes one lock for a few array operations and never
/// blocks on I/O, so the event loops call it directly. Records are kept as made (unredacted); readers redact.
///
/// Watchers (the `/api/events` streams) are told *that* something changed, never what: each keeps a cursor into
/// the store's change log and reads the changes on its own thread (`changes(since:)`), so a burst of exchanges
/// costs a watcher one wake-up, not one per exchange.
public final class FlowStore: FlowRecorder, Sendable {
    /// How much the store keeps: `--ui-flows`, and a byte budget for headers and captured bodies.
    public struct Limits: Sendable, Hashable {
        public var maxFlows: Int
        public var maxBytes: Int
        /// The most `--ui-flows` takes: far past what the byte bound lets the viewer hold, and far from overflow.
        public static let mostFlows = 10_000_000

        public init(maxFlows: Int = 5000, maxBytes: Int = 256 << 20) {
            self.maxFlows = min(max(1, maxFlows), Limits.mostFlows)
            self.maxBytes = max(1, maxBytes)
        }
    }

    /// One flow as the API shows it. Kept packed (`PackedFlow`); `record` unpacks it, so read it once per use.
    public struct Flow: Sendable {
        public let id: Int
        public var done: Bool
        let packed: PackedFlow
        public var record: FlowRecord { packed.record }
        /// The record without its captured bodies (cheaper: the list and the event stream do not show them).
        public var recordWithoutBodies: FlowRecord { packed.unpack(bodies: false) }
        public var state: String { done ? "done" : "pending" }

        init(record: FlowRecord, done: Bool, packed: PackedFlow) {
            self.id = record.id
            self.done = done
            self.packed = packed
        }
    }

    /// What happened since a watcher's cursor.
    public enum Change: Sendable, Equatable {
        /// The flow with this id was added or updated (it may have been evicted since).
        case flow(Int)
        /// Everything was cleared.
        case cleared
        /// The watcher fell behind the change log: it must reload the list.
        case reset
    }

    public let limits: Limits
    private let state: Mutex<State>
    private let watching = Atomic<Int>(0)

    public init(limits: Limits = Limits()) {
        self.limits = limits
        state = Mutex(State(changeLogLimit: max(1024, limits.maxFlows * 2)))
    }

    // MARK: FlowRecorder

    public func started(_ flow: FlowRecord) {
        update(flow, done: false)
    }

    public func record(_ flow: FlowRecord) {
        // A WebSocket's record at its 101 is the open session: pending until the session's end replaces it.
        update(flow, done: flow.webSocket?.isOpening != true)
    }

    /// Wakes the watchers so their streams end (shutdown).
    public func close() {
        let watchers = state.withLock { state -> [Watcher] in
            state.closed = true
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.closed() }
    }

    private func update(_ flow: FlowRecord, done: Bool) {
        let writer = PackedFlow.pack(flow)  // outside the lock; only the copy into a segment is inside
        let weight = writer.count + FlowStore.fixedWeight
        let (watchers, evicted) = writer.withBytes { bytes in
            state.withLock { state -> ([Watcher], [Flow]) in
                let packed = done ? state.segments.store(bytes) : FlowSegments.alone(bytes)
                let evicted = state.put(Flow(record: flow, done: done, packed: packed), weight: weight, limits: limits)
                return (state.watchers.isEmpty ? [] : Array(state.watchers.values), evicted)
            }
        }
        withExtendedLifetime(evicted) {}  // released here, with the lock free
        for watcher in watchers { watcher.changed() }
    }

    // MARK: reading

    /// The ids of the flows kept after `after`, oldest first, at most `limit` of them.
    public func ids(after: Int = 0, limit: Int = .max) -> [Int] {
        state.withLock { state in
            let ids = state.order[state.head...].filter { $0 > after && state.flows[$0] != nil }.sorted()
            return Array(ids.prefix(max(0, limit)))
        }
    }

    /// The flows of `ids(after:limit:)`, as they are now.
    public func flows(after: Int = 0, limit: Int = .max) -> [Flow] {
        ids(after: after, limit: limit).compactMap { flow(id: $0) }
    }

    public func flow(id: Int) -> Flow? {
        state.withLock { $0.flows[id] }
    }

    /// The flow with `id` and its version: the number of its latest change, which changes whenever the flow does
    /// (so what was made from one version, the event stream's JSON, can be shared until the next).
    public func flowAndVersion(id: Int) -> (flow: Flow, version: Int)? {
        state.withLock { state in
            guard let flow = state.flows[id], let version = state.latestChange[id] else { return nil }
            return (flow, version)
        }
    }

    public var count: Int { state.withLock { $0.flows.count } }

    /// Bytes held by the flows kept (as counted against `limits.maxBytes`).
    public var bytes: Int { state.withLock { $0.bytes } }

    /// Empties the store; returns how many flows it held.
    @discardableResult
    public func clear() -> Int {
        let (count, watchers) = state.withLock { state -> (Int, [Watcher]) in
            let count = state.flows.count
            state.flows.removeAll()
            state.order.removeAll()
            state.head = 0
            state.weights.removeAll()
            state.latestChange.removeAll()
            state.segments.removeAll()
            state.bytes = 0
            state.log(.cleared)
            return (count, Array(state.watchers.values))
        }
        for watcher in watchers { watcher.changed() }
        return count
    }

    // MARK: watching

    /// Someone who wants to hear that the store changed. `changed` and `closed` are called on the thread that
    /// changed the store (an event loop) with no lock held: they must only schedule work, never do it.
    public struct Watcher: Sendable {
        public var changed: @Sendable () -> Void
        public var closed: @Sendable () -> Void
        public init(changed: @escaping @Sendable () -> Void, closed: @escaping @Sendable () -> Void) {
            self.changed = changed
            self.closed = closed
        }
    }

    /// What a watcher starts from: the flows kept at one moment and the cursor of that same moment, taken under one
    /// lock, so that every change is either in the snapshot or after the cursor, never both and never neither.
    public struct Snapshot: Sendable {
        /// The ids of the flows kept (pending ones included), oldest first.
        public var kept: [Int]
        /// The change log's position at that moment: changes from it on came after the snapshot.
        public var cursor: Int
    }

    /// Registers a watcher; returns its token and the snapshot of the present moment (changes after its cursor are
    /// new), or nil when the store is closed (shutting down).
    public func watch(_ watcher: Watcher) -> (token: Int, snapshot: Snapshot)? {
        state.withLock { state in
            guard !state.closed else { return nil }
            state.nextToken += 1
            state.watchers[state.nextToken] = watcher
            watching.store(state.watchers.count, ordering: .relaxed)
            return (state.nextToken, state.snapshot())
        }
    }

    /// The flows kept now and the cursor of this moment (a watcher that fell behind starts over from one).
    public func snapshot() -> Snapshot {
        state.withLock { $0.snapshot() }
    }

    /// The ids of the finished flows kept now, oldest first: what a HAR download covers.
    public func doneIDs() -> [Int] {
        state.withLock { state in
            state.order[state.head...].filter { state.flows[$0]?.done == true }.sorted()
        }
    }

    public func unwatch(_ token: Int) {
        state.withLock { state in
            _ = state.watchers.removeValue(forKey: token)
            watching.store(state.watchers.count, ordering: .relaxed)
        }
    }

    /// Whether a page is watching (an `/api/events` stream is open), without taking the lock: exchanges announce
    /// themselves as pending only then, so a proxy nobody watches pays nothing for it.
    public var isWatched: Bool { watching.load(ordering: .relaxed) > 0 }

    public var watcherCount: Int { state.withLock { $0.watchers.count } }

    /// The changes after `cursor` (at most `limit` of the log's entries) and the cursor after them. A flow is given
    /// only at its latest change (never twice, and not at all once evicted): its state when read is its latest.
    public func changes(since cursor: Int, limit: Int = 256) -> (changes: [Change], cursor: Int) {
        state.withLock { state in
            let end = state.changeBase + state.changes.count
            if cursor < state.changeBase { return ([.reset], end) }
            let upper = min(end, cursor + limit)
            var result: [Change] = []
            for index in cursor..<upper {
                let change = state.changes[index - state.changeBase]
                if case .flow(let id) = change, state.latestChange[id] != index { continue }
                result.append(change)
            }
            return (result, upper)
        }
    }

    /// What a flow holds beyond its packed bytes (its entries in the store's tables), as counted against
    /// `maxBytes`: a flow weighs its packed size (bodies, WebSocket messages, headers, URL…) plus this.
    static let fixedWeight = 512
}
