import NIOCore

/// The request body on its way from the client to the bridge when the upload is throttled: the chunks the up pacer
/// has not let through yet, whether the request's end waits behind them, and why reading the client is paused (the
/// pacer, the bridge's full backlog, or both: reading resumes only when neither holds it).
///
/// A value the exchange owns; it decides nothing about time (the `Pacer` does) and calls nothing.
struct PacedUpload {
    /// What holds client reading paused.
    enum Hold: Hashable {
        case pacing, bridge
    }

    /// Chunks waiting for the pacer, oldest first.
    var queue = CircularBuffer<ByteBuffer>()
    /// The client's request ended while chunks still waited: the end goes to the bridge after them.
    var endWaits = false
    private var holds: Set<Hold> = []

    /// Forgets what waited (a new hop starts over); the holds stay, as reading is still paused.
    mutating func dropQueued() {
        queue.removeAll()
        endWaits = false
    }

    /// Adds `hold`; true when reading must be paused now (nothing held it before).
    mutating func hold(_ hold: Hold) -> Bool {
        let wasFree = holds.isEmpty
        holds.insert(hold)
        return wasFree
    }

    /// Removes `hold`; true when it was held and reading may resume now (nothing else holds it).
    mutating func release(_ hold: Hold) -> Bool {
        holds.remove(hold) != nil && holds.isEmpty
    }

    func isHeld(by hold: Hold) -> Bool { holds.contains(hold) }
}
