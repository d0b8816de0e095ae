/// The notes a WebSocket session's edits leave (logged as hook events when it ends), bounded however long the
/// session runs: each distinct note is kept once with how many times it came, up to `maxDistinct` of them; the rest
/// are only counted.
struct SessionNotes {
    static let maxDistinct = 50
    private var order: [String] = []
    private var counts: [String: Int] = [:]
    private var notKept = 0

    mutating func add(_ note: String) {
        if let count = counts[note] {
            counts[note] = count + 1
        } else if order.count < SessionNotes.maxDistinct {
            order.append(note)
            counts[note] = 1
        } else {
            notKept += 1
        }
    }

    /// The notes in the order they first came, `(×N)` after one that came N > 1 times.
    var lines: [String] {
        order.map { note in counts[note, default: 1] > 1 ? "\(note) (×\(counts[note, default: 1]))" : note }
            + (notKept > 0 ? ["\(notKept) more notes, over \(SessionNotes.maxDistinct) different ones, not kept"] : [])
    }
}
