import ProxyLog
import ProxyModel

/// One API answer that holds many flows (`GET /api/har`, `GET /api/flows`), made a part at a time: the caller asks
/// for the next part once the client took the last, so a client that reads slowly (or not at all) holds about one
/// part, never the whole answer (a review's eight idle `/api/flows` readers held 1.5 GB).
///
/// What it covers: the flows kept when it began (their ids, taken at once), oldest first — for a HAR the finished
/// ones the filter passes, for the flow list those after an id, up to a limit. Each is read from the store when its
/// turn comes: one cleared or dropped beyond `--ui-flows` by then is left out, and a flow that began after the
/// download is not in it. For a store that does not change meanwhile the parts put together are byte for byte
/// `FlowJSON.har` (or `FlowJSON.array` of `FlowJSON.object`s) of those flows. A value; `next` reads the store
/// (thread-safe).
public struct FlowDownload: Sendable {
    enum Format: Sendable {
        case har(filter: FlowFilter, creatorVersion: String)
        case flows(bodies: Bool)
    }

    let store: FlowStore
    let redactor: Redactor
    let format: Format
    private var ids: ArraySlice<Int>
    private var begun = false
    private var wroteEntry = false
    /// Whether every part has been given (`next` then returns nil).
    public private(set) var isFinished = false

    /// About how much one part holds: entries are added until it is at least this big (one entry may be more).
    public static let partBytes = 256 << 10

    /// A HAR 1.2 file of the finished flows `filter` passes.
    init(store: FlowStore, redactor: Redactor, filter: FlowFilter, creatorVersion: String) {
        self.store = store
        self.redactor = redactor
        self.format = .har(filter: filter, creatorVersion: creatorVersion)
        self.ids = store.doneIDs()[...]
    }

    /// The JSON array of the flows after `after`, at most `limit` of them, pending ones included.
    init(store: FlowStore, redactor: Redactor, after: Int, limit: Int, bodies: Bool) {
        self.store = store
        self.redactor = redactor
        self.format = .flows(bodies: bodies)
        self.ids = store.ids(after: after, limit: limit)[...]
    }

    /// The next part (at least `minBytes` but for the last), or nil once the whole answer was given.
    public mutating func next(minBytes: Int = FlowDownload.partBytes) -> [UInt8]? {
        guard !isFinished else { return nil }
        var bytes: [UInt8] = []
        if !begun {
            begun = true
            switch format {
            case .har(_, let creatorVersion):
                bytes = Array(#"{"log":{"version":"1.2","creator":{"name":"hookproxy","version":"#.utf8)
                FlowJSON.appendString(creatorVersion, to: &bytes)
                bytes.append(contentsOf: Array(#"},"entries":["#.utf8))
            case .flows:
                bytes = [UInt8(ascii: "[")]
            }
        }
        while bytes.count < minBytes, let id = ids.popFirst() {
            guard let entry = self.entry(id) else { continue }
            if wroteEntry { bytes.append(UInt8(ascii: ",")) }
            wroteEntry = true
            bytes.append(contentsOf: entry)
        }
        if ids.isEmpty {
            switch format {
            case .har: bytes.append(contentsOf: Array("]}}".utf8))
            case .flows: bytes.append(UInt8(ascii: "]"))
            }
            isFinished = true
        }
        return bytes
    }

    /// The flow's JSON in this answer, or nil when it is left out (cleared or dropped since, not done, filtered).
    private func entry(_ id: Int) -> [UInt8]? {
        guard let flow = store.flow(id: id) else { return nil }
        switch format {
        case .har(let filter, _):
            guard flow.done else { return nil }
            let record = redactor.redact(flow.record)
            guard filter.matches(record) else { return nil }
            return Array(HARWriter.entryJSON(for: record).utf8)
        case .flows(let bodies):
            return FlowJSON.object(redactor.redact(bodies ? flow.record : flow.recordWithoutBodies), state: flow.state,
                                   bodies: bodies)
        }
    }
}
