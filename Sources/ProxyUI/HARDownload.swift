import ProxyLog
import ProxyModel

/// One `GET /api/har` download, made a part at a time: the caller asks for the next part once the client took the
/// last, so a client that reads slowly (or not at all) holds about one part of the file, never all of it.
///
/// What it covers: the finished flows kept when it began (their ids, taken at once), oldest first, that the filter
/// passes. Each is read from the store when its turn comes: one cleared or dropped beyond `--ui-flows` by then is
/// left out, and a flow that began after the download is not in it. For a store that does not change meanwhile the
/// parts put together are byte for byte `FlowJSON.har` of those flows. A value; `next` reads the store (thread-safe).
public struct HARDownload: Sendable {
    let store: FlowStore
    let redactor: Redactor
    let filter: FlowFilter
    let creatorVersion: String
    private var ids: ArraySlice<Int>
    private var begun = false
    private var wroteEntry = false
    /// Whether every part has been given (`next` then returns nil).
    public private(set) var isFinished = false

    /// About how much one part holds: entries are added until it is at least this big (one entry may be more).
    public static let partBytes = 256 << 10

    init(store: FlowStore, redactor: Redactor, filter: FlowFilter, creatorVersion: String) {
        self.store = store
        self.redactor = redactor
        self.filter = filter
        self.creatorVersion = creatorVersion
        self.ids = store.doneIDs()[...]
    }

    /// The next part of the file (at least `minBytes` but for the last), or nil once the whole file was given.
    public mutating func next(minBytes: Int = HARDownload.partBytes) -> [UInt8]? {
        guard !isFinished else { return nil }
        var bytes: [UInt8] = []
        if !begun {
            begun = true
            bytes = Array(#"{"log":{"version":"1.2","creator":{"name":"hookproxy","version":"#.utf8)
            FlowJSON.appendString(creatorVersion, to: &bytes)
            bytes.append(contentsOf: Array(#"},"entries":["#.utf8))
        }
        while bytes.count < minBytes, let id = ids.popFirst() {
            guard let flow = store.flow(id: id), flow.done else { continue }  // cleared or dropped since it began
            let record = redactor.redact(flow.record)
            guard filter.matches(record) else { continue }
            if wroteEntry { bytes.append(UInt8(ascii: ",")) }
            wroteEntry = true
            bytes.append(contentsOf: HARWriter.entryJSON(for: record).utf8)
        }
        if ids.isEmpty {
            bytes.append(contentsOf: Array("]}}".utf8))
            isFinished = true
        }
        return bytes
    }
}
