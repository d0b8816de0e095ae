import ProxyModel

/// `--har FILE`: HAR 1.2 (no pages; creator `hookproxy`), one entry per upstream exchange (each hop of a followed
/// redirect is its own entry), hookproxy's rules, hook events, upstream URL, hop, truncation and error under
/// `_hookproxy`.
///
/// The file on disk is complete, valid JSON after every entry (see `HARFile`): a SIGKILL loses at most the exchanges
/// not yet written. Data is fsynced at most every 200 ms while entries arrive (for power loss; a killed process loses
/// nothing that was written). An existing HAR written by hookproxy is appended to; an empty file is started; any other
/// non-empty file is refused and left untouched.
///
/// The initializer opens FILE under an exclusive `flock` and throws `LogFileError` when it cannot (directory missing,
/// permission, another hookproxy writing it — `isLocked`, foreign file). `record` only queues; one background thread
/// redacts, encodes and writes. `close()` drains the queue and leaves the file valid and synced.
public final class HARWriter: FlowRecorder, @unchecked Sendable {
    public let path: String
    private let queue: AsyncRecorder

    /// - Parameters:
    ///   - path: `--har FILE`.
    ///   - creatorVersion: hookproxy's version, written as `log.creator.version` of a new file.
    ///   - redactor: `--log-secrets`, `--redact-query`.
    ///   - queueCapacity: records waiting to be written before new ones are dropped (with a warning on stderr).
    public init(path: String, creatorVersion: String, redactor: Redactor = Redactor(),
                queueCapacity: Int = 10_000) throws(LogFileError) {
        self.path = path
        let file = try LogFile(path: path, append: false)
        let har = try HARFile(file: file, creatorVersion: creatorVersion)
        queue = AsyncRecorder(name: "har \(path)", sink: har, redactor: redactor, capacity: queueCapacity)
    }

    public func record(_ flow: FlowRecord) { queue.record(flow) }
    /// Blocks until every exchange recorded before the call is in the file (and the file is valid JSON).
    public func flush() { queue.flush() }
    public func close() { queue.close() }
    /// Records dropped because the queue was full.
    public var droppedCount: Int { queue.dropped }

    /// The JSON of the entry written for an already redacted record.
    public static func entryJSON(for flow: FlowRecord) -> String {
        var json = JSONWriter(capacity: 4096)
        json.harEntry(flow)
        return String(decoding: json.bytes, as: UTF8.self)
    }
}
