import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyUI
import Synchronization

/// One `GET /api/events` stream: server-sent events. First the flows kept when it opened, oldest first, one `flow`
/// event each (its data the flow without bodies), then `ready`; from then on one `flow` event per new or updated
/// flow, `clear` after a clear, `reset` when this client fell too far behind (a new snapshot and `ready` follow);
/// a comment line every `heartbeat` keeps it from looking idle to anything in between.
///
/// Each state of a flow is sent once, in order: the snapshot and the cursor it starts from are taken under one lock
/// (`FlowStore.watch`), and a flow is sent only at a version the stream has already read past (a flow that changed
/// since is left to the change that changed it, still ahead of the cursor). A client that read the list from
/// `/api/flows` and then opened the stream could get a flow in both, or miss the one that changed between them.
///
/// Event-loop bound (the client connection's loop). The store only *signals* a change (`Signal`, from any thread,
/// at most one drain scheduled at a time, `coalescing` after the first change); the drain runs here, reads the changes after this stream's cursor, and
/// writes while the channel is writable — a client that stops reading holds only its cursor, never a queue. The
/// idle timeout does not cut the stream (the request handler ignores idle events in this state). At shutdown the
/// store closes its watchers: the stream writes its end and the connection closes cleanly.
final class EventStream {
    private weak var handler: ProxyRequestHandler?
    private let viewer: Viewer
    private let eventLoop: any EventLoop
    private let signal: Signal
    private var token: Int?
    private var cursor = 0
    /// The ids of the snapshot's flows not yet written; `ready` follows the last.
    private var snapshot: ArraySlice<Int> = []
    private var snapshotPending = false
    private var heartbeat: Scheduled<Void>?
    private(set) var ended = false
    /// Flows first read while pending: looked at again at the next drain (a coalescing interval later), and sent
    /// then if still pending (once done, the change that finished them is still ahead of the cursor and sends them).
    private var young: [(id: Int, seen: NIODeadline)] = []

    static let heartbeatInterval = TimeAmount.seconds(15)
    /// How long a change waits for others before the stream is written: under load one drain (one flush) per
    /// stream per interval, and an exchange that starts and ends within it is one event, not two.
    static let coalescing = TimeAmount.milliseconds(50)
    /// Changes written per drain before the loop is given back (the rest follow in the next turn).
    static let batch = 256

    init(handler: ProxyRequestHandler, viewer: Viewer, eventLoop: any EventLoop) {
        self.handler = handler
        self.viewer = viewer
        self.eventLoop = eventLoop
        self.signal = Signal(eventLoop: eventLoop)
    }

    /// Writes the head and starts listening; false (nothing written) when the store is closed (shutting down).
    func start(version: HTTPVersion = .http1_1) -> Bool {
        let signal = self.signal
        guard let (token, snapshot) = viewer.store.watch(FlowStore.Watcher(
            changed: { signal.changed() }, closed: { signal.closed() })) else { return false }
        self.token = token
        begin(snapshot)
        signal.attach(self)
        var headers = HTTPHeaders([("Content-Type", "text/event-stream"), ("X-Accel-Buffering", "no")])
        for (name, value) in ViewerAnswer.commonHeaders { headers.add(name: name, value: value) }
        if version.major == 1 && version.minor == 0 { headers.add(name: "Connection", value: "close") }
        handler?.send(.head(HTTPResponseHead(version: version, status: .ok, headers: headers)))
        write("retry: 2000\n\n")
        handler?.flush()
        scheduleHeartbeat()
        drain()
        return true
    }

    private func scheduleHeartbeat() {
        heartbeat = eventLoop.assumeIsolated().scheduleTask(in: EventStream.heartbeatInterval) { [weak self] in
            guard let self, !self.ended else { return }
            if self.handler?.isWritable == true {
                self.write(": keep-alive\n\n")
                self.handler?.flush()
            }
            self.scheduleHeartbeat()
        }
    }

    /// Starts (over) from `snapshot`: its flows are written first, then `ready`, then the changes after its cursor.
    private func begin(_ snapshot: FlowStore.Snapshot) {
        cursor = snapshot.cursor
        self.snapshot = snapshot.kept[...]
        snapshotPending = true
        young.removeAll()  // the snapshot has them, as they are now
    }

    /// Writes what changed since the cursor, while the client keeps up: one buffer, one flush per drain.
    func drain() {
        signal.drained()
        guard !ended, let handler else { return }
        var events = ByteBufferAllocator().buffer(capacity: 0)
        if snapshotPending {
            guard handler.isWritable else { return }  // writability drains again
            let part = snapshot.prefix(EventStream.batch)
            snapshot = snapshot.dropFirst(part.count)
            for id in part { append(.flow(id), to: &events, look: .snapshot) }
            if snapshot.isEmpty {
                snapshotPending = false
                events.writeStaticString("event: ready\ndata: {}\n\n")
            }
            handler.send(.body(.byteBuffer(events)))
            handler.flush()
            if snapshotPending {
                // the rest in the next turn: the loop serves others first
                eventLoop.assumeIsolated().execute { [weak self] in self?.drain() }
            } else {
                signal.changed()  // the changes since the snapshot, at the next coalescing interval as any
            }
            return
        }
        // A drain right after a full batch comes too soon for a second look: only those deferred an interval ago.
        let now = eventLoop.now
        if handler.isWritable {
            let due = young.prefix { now - $0.seen >= EventStream.coalescing }
            young.removeFirst(due.count)
            for flow in due { append(.flow(flow.id), to: &events, look: .second) }
        }
        while handler.isWritable {
            let (changes, next) = viewer.store.changes(since: cursor, limit: EventStream.batch)
            if next == cursor { break }
            let windowWasFull = next - cursor >= EventStream.batch  // (changes are deduplicated: count them so)
            cursor = next
            if changes.first == .reset {
                // Fell behind the change log: start over from a new snapshot (the client empties its list).
                events.writeStaticString("event: reset\ndata: {}\n\n")
                handler.send(.body(.byteBuffer(events)))
                handler.flush()
                begin(viewer.store.snapshot())
                eventLoop.assumeIsolated().execute { [weak self] in self?.drain() }
                return
            }
            for change in changes { append(change, to: &events, look: .log) }
            if windowWasFull {
                // more may wait: let the loop serve others first
                eventLoop.assumeIsolated().execute { [weak self] in self?.drain() }
                break
            }
        }
        if events.readableBytes > 0 {
            handler.send(.body(.byteBuffer(events)))
            handler.flush()
        }
        if !young.isEmpty { signal.changed() }  // look at them again after the coalescing interval
    }

    /// Where a flow written by `append` was found.
    private enum Look {
        /// In the snapshot the stream started from.
        case snapshot
        /// In the change log, at its latest change.
        case log
        /// In `young`: read pending from the log a coalescing interval ago.
        case second
    }

    /// Writes `change` as an event. A flow is written only at a version before the cursor: one that changed since
    /// (after the snapshot, or after the changes just read) is left to that change, still ahead, so no state of it
    /// is written twice. A pending flow read from the log is deferred to `young`; on the second look a flow that is
    /// done by then was written when its last change was read.
    private func append(_ change: FlowStore.Change, to events: inout ByteBuffer, look: Look) {
        switch change {
        case .flow(let id):
            guard let (flow, version) = viewer.store.flowAndVersion(id: id), version < cursor else { return }
            if look == .second && flow.done { return }
            if look == .log && !flow.done {
                // Most exchanges end within moments: read again at the next drain, it is then one event (done).
                young.append((id, eventLoop.now))
                return
            }
            let viewer = self.viewer
            let json = viewer.events.bytes(id: id, version: version) {
                FlowJSON.object(viewer.redactor.redact(flow.recordWithoutBodies), state: flow.state, bodies: false)
            }
            events.writeStaticString("event: flow\ndata: ")
            events.writeBytes(json)
            events.writeStaticString("\n\n")
        case .cleared:
            events.writeStaticString("event: clear\ndata: {}\n\n")
        case .reset:
            events.writeStaticString("event: reset\ndata: {}\n\n")  // (drain starts over before it gets here)
        }
    }

    private func write(_ text: String) {
        guard let handler else { return }
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        handler.send(.body(.byteBuffer(buffer)))
    }

    /// The store closed (shutdown): end the response and close the connection.
    func finish() {
        guard !ended else { return }
        stop()
        handler?.eventStreamFinished()
    }

    /// The client went away (or the stream finished): stop listening.
    func stop() {
        guard !ended else { return }
        ended = true
        heartbeat?.cancel()
        heartbeat = nil
        if let token { viewer.store.unwatch(token) }
        signal.detach()
    }

    /// The store's side: schedules at most one drain at a time on the stream's loop. Thread-safe.
    final class Signal: Sendable {
        private let eventLoop: any EventLoop
        private let scheduled = Atomic<Bool>(false)
        private let stream: NIOLoopBoundBox<EventStream?>

        init(eventLoop: any EventLoop) {
            self.eventLoop = eventLoop
            self.stream = NIOLoopBoundBox(nil, eventLoop: eventLoop)
        }

        func attach(_ stream: EventStream) { self.stream.value = stream }
        func detach() { stream.value = nil }
        func drained() { scheduled.store(false, ordering: .relaxed) }

        func changed() {
            guard !scheduled.exchange(true, ordering: .relaxed) else { return }
            eventLoop.scheduleTask(in: EventStream.coalescing) { self.stream.value?.drain() }
        }

        func closed() {
            eventLoop.execute { self.stream.value?.finish() }
        }
    }
}

@available(*, unavailable)
extension EventStream: Sendable {}
