import ProxyModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The synchronous end of a log writer: formats and writes records. Called only on its `AsyncRecorder`'s thread.
protocol LogSink: AnyObject {
    /// Writes one record (already redacted), or keeps it for `endBatch`. Reports its own I/O errors; never throws.
    func write(_ flow: FlowRecord)
    /// Writes what `write` kept: called after each batch of records (one system call for a batch, not one each).
    func endBatch()
    /// Makes what was written durable (fsync); called at most every `syncInterval` while records arrive.
    func sync()
    /// Flushes and closes; the last call.
    func close()
}

/// Takes records from any thread without blocking and hands them to one sink on one background thread.
///
/// `record` only appends to a bounded queue under a lock (never waits for I/O). When the queue holds `capacity`
/// records, or the records queued and being written hold `byteCapacity` bytes of captured bodies (each record can
/// carry up to twice the capture limit), the new one is dropped and counted; stderr gets `hookproxy: log writer behind (NAME), dropped N entries`
/// on the first drop and every `warnEvery` drops after it. The thread applies the `Redactor`, writes, and syncs at most
/// every `syncInterval` (and when the queue runs dry after a write). `close()` drains everything queued, then closes
/// the sink; it blocks until then and is idempotent.
///
/// Wake-ups are batched: once the queue runs dry the thread naps for `napInterval` before it sleeps, and records that
/// arrive during the nap wait for its end (or for `wakeBatch` of them) instead of waking it one by one. Under load
/// the thread then writes a batch per nap, not one record per context switch; an idle proxy's first record still
/// wakes it at once.
final class AsyncRecorder: @unchecked Sendable {
    let name: String
    private let condition = Condition()
    // guarded by `condition`:
    private var pending: [(flow: FlowRecord, weight: Int)] = []
    /// The thread waits for records: `.asleep` is woken by the next one, `.napping` by a `wakeBatch`-th.
    private var waiting = Waiting.no
    private var closing = false
    private var finished = false
    private var enqueued = 0
    private var written = 0
    private(set) var dropped = 0
    /// Body bytes held by queued records and the batch being written.
    private var queuedBytes = 0

    private enum Waiting { case no, napping, asleep }
    static let napInterval = 0.005  // s
    static let wakeBatch = 64

    private let capacity: Int
    private let byteCapacity: Int
    private let warnEvery: Int
    private let warn: @Sendable (String) -> Void

    init(name: String, sink: LogSink, redactor: Redactor, capacity: Int = 10_000, byteCapacity: Int = 64 << 20,
         warnEvery: Int = 1_000, syncInterval: Double = 0.2,
         warn: @escaping @Sendable (String) -> Void = AsyncRecorder.stderr) {
        self.name = name
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, byteCapacity)
        self.warnEvery = max(1, warnEvery)
        self.warn = warn
        let box = SinkBox(sink)
        let started = DetachedThread.start { [self] in self.run(box.sink, redactor: redactor, syncInterval: syncInterval) }
        precondition(started, "hookproxy: cannot start the log writer thread (\(name))")
    }

    /// Queues a record; returns at once. Thread-safe.
    func record(_ flow: FlowRecord) {
        condition.lock()
        if closing {
            condition.unlock()
            return
        }
        let weight = AsyncRecorder.weight(of: flow)
        // (one record is always taken when nothing is queued, however large)
        if pending.count >= capacity || (queuedBytes > 0 && queuedBytes + weight > byteCapacity) {
            dropped += 1
            let count = dropped
            condition.unlock()
            if count == 1 || count % warnEvery == 0 {
                warn("hookproxy: log writer behind (\(name)), dropped \(count) entries")
            }
            return
        }
        pending.append((flow, weight))
        queuedBytes += weight
        enqueued += 1
        if waiting == .asleep || (waiting == .napping && pending.count >= AsyncRecorder.wakeBatch) {
            waiting = .no
            condition.signal()
        }
        condition.unlock()
    }

    /// Blocks until every record queued before the call is written (not necessarily synced to disk).
    func flush() {
        condition.lock()
        let target = enqueued
        if written < target { condition.broadcast() }  // ends a nap
        while written < target && !finished { condition.wait() }
        condition.unlock()
    }

    /// Drains the queue, closes the sink and stops the thread. Blocks until done; later calls return at once.
    func close() {
        condition.lock()
        closing = true
        condition.broadcast()
        while !finished { condition.wait() }
        let count = dropped
        condition.unlock()
        if count > 0, count % warnEvery != 0, count != 1 {
            warn("hookproxy: log writer behind (\(name)), dropped \(count) entries in all")
        }
    }

    private func run(_ sink: LogSink, redactor: Redactor, syncInterval: Double) {
        var lastSync = Condition.now()
        var unsynced = false
        while true {
            condition.lock()
            if pending.isEmpty && !closing {
                // A nap first: what arrives meanwhile is written as one batch.
                waiting = .napping
                _ = condition.wait(until: Condition.now() + AsyncRecorder.napInterval)
            }
            while pending.isEmpty && !closing {
                waiting = .asleep
                if unsynced {
                    // sync once the interval has passed, even if nothing else arrives
                    let deadline = lastSync + syncInterval
                    if !condition.wait(until: deadline) { break }
                } else {
                    condition.wait()
                }
            }
            waiting = .no
            let batch = pending
            pending = []
            let done = batch.isEmpty && closing
            condition.unlock()

            for (flow, _) in batch { sink.write(redactor.redact(flow)) }
            if !batch.isEmpty { sink.endBatch() }
            if !batch.isEmpty { unsynced = true }
            if unsynced, Condition.now() - lastSync >= syncInterval || done {
                sink.sync()
                lastSync = Condition.now()
                unsynced = false
            }

            condition.lock()
            written += batch.count
            queuedBytes -= batch.reduce(0) { $0 + $1.weight }
            condition.broadcast()
            condition.unlock()
            if done { break }
        }
        sink.close()
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// The memory a queued record holds, as counted against `byteCapacity`: its captured bodies plus a head's worth.
    static func weight(of flow: FlowRecord) -> Int {
        (flow.requestBody?.bytes.count ?? 0) + (flow.responseBody?.bytes.count ?? 0)
            + flow.request.headers.lineBytes + (flow.response?.headers.lineBytes ?? 0) + flow.url.utf8.count + 512
    }

    static let stderr: @Sendable (String) -> Void = { message in
        StandardStream.write(message + "\n", to: STDERR_FILENO)
    }
}

extension LogSink {
    func endBatch() {}
}

/// A sink that keeps a batch in memory and writes it to `file` at `endBatch`: syncing or closing writes it first.
protocol BatchingFileSink: LogSink {
    var file: LogFile { get }
}

extension BatchingFileSink {
    func sync() {
        endBatch()
        file.sync()
    }

    func close() {
        endBatch()
        file.close()
    }
}

/// Moves the sink into the writer thread; only that thread touches it afterwards.
private final class SinkBox: @unchecked Sendable {
    let sink: LogSink
    init(_ sink: LogSink) { self.sink = sink }
}
