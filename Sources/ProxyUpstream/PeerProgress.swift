import NIOCore

/// Whether a peer still takes part in a connection that is winding down: it made progress within the last `timeout`
/// (`--idle-timeout`). Progress is what its kernel acknowledged growing (`AcknowledgedBytes`: a peer that reads,
/// however slowly) or whatever else the owner saw and reports (the backlog shrank, the peer sent bytes). Judged at
/// checks a quarter of `timeout` apart, so a stalled peer is found within 1¼ timeouts of its last progress (checked
/// once per timeout, the first check could take the acknowledgement of the last bytes sent for progress, and a peer
/// was held two). The one rule behind `UpstreamConnection.closeWhenSent`, the client drain watch and the WebSocket
/// close wait.
///
/// A value; its owner keeps it on one event loop and schedules the checks.
public struct PeerProgress {
    public let timeout: TimeAmount
    private var acknowledged: UInt64
    private var last: NIODeadline

    /// Starts at `now`, the peer's acknowledged count being `acknowledged`.
    public init(timeout: TimeAmount, acknowledged: UInt64, now: NIODeadline = .now()) {
        self.timeout = timeout
        self.acknowledged = acknowledged
        self.last = now
    }

    /// When the first check is due.
    public var firstCheck: NIODeadline { last + checkInterval }

    private var checkInterval: TimeAmount { .nanoseconds(timeout.nanoseconds / 4) }

    /// The peer made progress now (the owner saw it: bytes it sent).
    public mutating func note(at now: NIODeadline = .now()) {
        last = max(last, now)
    }

    /// A check: `count` is what the peer has acknowledged now, `progressed` whether the owner saw progress of its own
    /// since the last check. Returns when the next check is due, or nil: the peer made no progress for `timeout`.
    public mutating func check(acknowledged count: UInt64, progressed: Bool = false,
                               now: NIODeadline = .now()) -> NIODeadline? {
        if progressed || count > acknowledged { last = max(last, now) }
        acknowledged = max(acknowledged, count)
        let due = last + timeout
        guard due > now else { return nil }
        return min(due, now + checkInterval)
    }
}
