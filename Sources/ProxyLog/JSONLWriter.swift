import ProxyModel

/// `--jsonl FILE`: one JSON object per exchange (per hop), one line each, appended to FILE.
///
/// The initializer opens FILE (created 0600 when missing, appended to when it exists, after a torn last record of
/// its own is cut off) under an exclusive lock and throws `LogFileError` when that fails. `record` only queues
/// (never blocks the caller); one background thread redacts, encodes (`JSONWriter`, one reused buffer) and writes
/// the lines of each batch (the records that arrived together) with a single `write(2)` (so a reader sees whole
/// lines), and fsyncs at most every 200 ms. On a full disk a batch is dropped whole (the part of it that got in is
/// cut off again, stderr is told once), so every line in the file is a whole record and later batches append
/// cleanly once there is room. `close()` drains the queue, syncs and releases the lock.
public final class JSONLWriter: FlowRecorder, @unchecked Sendable {
    public let path: String
    private let queue: AsyncRecorder

    /// - Parameters:
    ///   - path: `--jsonl FILE`.
    ///   - redactor: `--log-secrets`, `--redact-query`.
    ///   - queueCapacity: records waiting to be written before new ones are dropped (with a warning on stderr).
    public init(path: String, redactor: Redactor = Redactor(), queueCapacity: Int = 10_000) throws(LogFileError) {
        self.path = path
        let file = try LogFile(path: path, append: true)
        try Self.dropTornLastLine(file)
        queue = AsyncRecorder(name: "jsonl \(path)", sink: JSONLSink(file: file), redactor: redactor,
                              capacity: queueCapacity)
    }

    /// A file that ends inside a line: a record of hookproxy's torn by a kill during a write (it starts `{"id":`,
    /// or is a piece of that) is cut off, so the lines appended next are whole, as HAR's reopening does for a torn
    /// entry. Anything else (a file written by something else) is kept, and a newline written after it.
    private static func dropTornLastLine(_ file: LogFile) throws(LogFileError) {
        guard file.size > 0 else { return }
        let tail = try file.tailAfterLastNewline(limit: 64 << 20)
        if tail?.isEmpty == true { return }
        let record = Array(#"{"id":"#.utf8)
        if let tail, tail.starts(with: record) || record.starts(with: tail) {
            try file.truncate(to: file.size - tail.count)
            AsyncRecorder.stderr("hookproxy: \(file.path) ended inside a line (was hookproxy killed?); dropped \(tail.count) bytes of it and appending after the last complete line")
        } else {
            try file.write(Array("\n".utf8))
            AsyncRecorder.stderr("hookproxy: \(file.path) did not end with a newline; appending after it on a new line")
        }
    }

    public func record(_ flow: FlowRecord) { queue.record(flow) }
    /// Blocks until every exchange recorded before the call is in the file.
    public func flush() { queue.flush() }
    public func close() { queue.close() }
    /// Records dropped because the queue was full.
    public var droppedCount: Int { queue.dropped }

    /// The line (without newline) written for an already redacted record.
    public static func line(for flow: FlowRecord) -> String {
        String(decoding: lineBytes(for: flow), as: UTF8.self)
    }

    /// The same line as bytes, written into a buffer sized for a typical record (the viewer's API and event
    /// stream encode one per flow they send).
    public static func lineBytes(for flow: FlowRecord) -> [UInt8] {
        var json = JSONWriter(capacity: 2048)
        json.jsonlRecord(flow)
        return json.bytes
    }
}

/// Writes JSONL lines; runs on the writer's thread only.
final class JSONLSink: BatchingFileSink {
    private static let newline = Array("\n".utf8)
    let file: LogFile
    private var json = JSONWriter()
    /// Lines in `json` not written yet.
    private var batched = 0
    private var reportedError = false

    init(file: LogFile) { self.file = file }

    func write(_ flow: FlowRecord) {
        guard flow.webSocket?.isOpening != true else { return }  // the session's end writes its one line
        if batched == 0 { json.reset() }
        json.beginRecord()
        json.jsonlRecord(flow)
        json.append(raw: JSONLSink.newline)
        batched += 1
        if json.count >= HARFile.batchBytes { endBatch() }
    }

    /// Writes the lines `write` kept in one `write(2)` (whole lines: a reader never sees half of one). A batch the
    /// disk has no room for is dropped whole: the file keeps only complete lines, and the next batch starts a line.
    func endBatch() {
        guard batched > 0 else { return }
        batched = 0
        do {
            try json.withBytes { bytes throws(LogFileError) in try file.appendWhole(bytes) }
        } catch {
            if !reportedError {
                reportedError = true
                AsyncRecorder.stderr("\(error)")
            }
        }
    }
}
