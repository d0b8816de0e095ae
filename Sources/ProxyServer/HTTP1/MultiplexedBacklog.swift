import Synchronization

/// What every HTTP/2 upstream transfer together holds for clients that read slowly. Such a transfer is not paused
/// while its connection may carry others (`TransferBridge`), so its response queues for its client, up to
/// `streamLimit` a stream;
/// with no bound across them, one HTTP/2 client that opened 100 streams and read none of them could make hookproxy
/// hold 1.6 GiB. A transfer that is behind its client (past the bridge's high-water mark) and would take the total
/// past `limit` is refused instead, and its queue given back at once. Thread-safe, lock-free.
final class MultiplexedBacklog: Sendable {
    let limit: Int
    /// What one transfer may queue (`TransferBridge`).
    let streamLimit: Int
    private let held = Atomic<Int>(0)

    init(limit: Int, streamLimit: Int = 16 * 1024 * 1024) {
        self.limit = limit
        self.streamLimit = streamLimit
    }

    /// Bytes held now, across every transfer.
    var bytes: Int { held.load(ordering: .relaxed) }

    /// Takes `count` more bytes for a transfer that already holds `own`; refused (false, nothing taken) when that
    /// transfer is behind its client and the total would pass the limit.
    func take(_ count: Int, holding own: Int) -> Bool {
        let total = held.add(count, ordering: .relaxed).newValue
        guard own >= TransferBridge.highWater, total > limit else { return true }
        held.subtract(count, ordering: .relaxed)
        return false
    }

    /// Counts `count` bytes a transfer already holds (one that may no longer pause), whatever the total.
    func hold(_ count: Int) {
        held.add(count, ordering: .relaxed)
    }

    /// Gives back bytes the client took, or a refused transfer's queue.
    func release(_ count: Int) {
        guard count > 0 else { return }
        held.subtract(count, ordering: .relaxed)
    }
}
