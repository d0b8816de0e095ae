import ProxyLog
import ProxyModel
import ProxyUI
import Synchronization

/// The running traffic viewer: its flow store (fed as one more recorder) and its API. Thread-safe; one per proxy,
/// made by `ProxyServer.start` when the configuration asks for it.
public final class Viewer: Sendable {
    public let store: FlowStore
    let api: ViewerAPI
    let redactor: Redactor

    /// Each flow's `flow` event as last made, shared by every `/api/events` stream.
    let events = EventCache()

    init(settings: ViewerSettings) {
        store = FlowStore(limits: settings.limits)
        redactor = settings.redactor
        api = ViewerAPI(store: store, redactor: settings.redactor, version: HookproxyVersion.current)
    }
}

/// The event streams' JSON of a flow, made once per version of the flow and shared: every stream sends the same
/// bytes, and making them (unpacking, redacting, serializing) is the costly part, so N viewer tabs (or N hostile
/// `/api/events` clients) cost the proxy one serialization per change instead of N. Bounded: past `maxEntries` or
/// `maxBytes` it starts over (streams then make an event again once). Thread-safe; nothing is made under the lock.
final class EventCache: Sendable {
    static let maxEntries = 4096
    static let maxBytes = 16 << 20

    private struct State {
        var entries: [Int: (version: Int, bytes: [UInt8])] = [:]
        var bytes = 0
    }

    private let state = Mutex(State())

    /// The bytes for flow `id` at `version`, from the cache or from `make` (then kept).
    func bytes(id: Int, version: Int, make: () -> [UInt8]) -> [UInt8] {
        if let hit = state.withLock({ $0.entries[id] }), hit.version == version { return hit.bytes }
        let made = make()
        state.withLock { state in
            if let old = state.entries[id] {
                guard old.version < version else { return }  // another stream kept a newer one meanwhile
                state.bytes -= old.bytes.count
            }
            if state.entries.count >= EventCache.maxEntries || state.bytes + made.count > EventCache.maxBytes {
                state.entries.removeAll(keepingCapacity: true)
                state.bytes = 0
            }
            state.entries[id] = (version, made)
            state.bytes += made.count
        }
        return made
    }
}
