/// A token bucket: tokens (bytes) flow in at `bytesPerSecond` up to `burst`, and a sender takes what it may send.
/// A value with no clock of its own: every call passes the time (nanoseconds of a monotonic clock), so tests
/// drive it with a made-up clock and `Pacer` with the event loop's.
struct TokenBucket {
    let bytesPerSecond: Int
    /// Most tokens held at once: what may go out at once after a pause (50 ms of traffic by default).
    let burst: Int
    private var tokens: Double
    private var lastRefill: UInt64

    /// A full bucket at `now`.
    init(bytesPerSecond: Int, now: UInt64, burst: Int? = nil) {
        precondition(bytesPerSecond > 0, "a token bucket needs a positive rate")
        self.bytesPerSecond = bytesPerSecond
        self.burst = max(1, burst ?? bytesPerSecond / 20)
        self.tokens = Double(self.burst)
        self.lastRefill = now
    }

    private mutating func refill(_ now: UInt64) {
        guard now > lastRefill else { return }
        let added = Double(now - lastRefill) * Double(bytesPerSecond) / 1_000_000_000
        tokens = min(Double(burst), tokens + added)
        lastRefill = now
    }

    /// Takes up to `count` tokens at `now` and returns how many it took (0 when the bucket is empty).
    mutating func take(upTo count: Int, now: UInt64) -> Int {
        refill(now)
        let taken = min(count, Int(tokens))
        tokens -= Double(taken)
        return taken
    }

    /// Nanoseconds from `now` until the bucket holds 20 ms of traffic (or its burst, when smaller), at least 1 ms:
    /// when a sender that found it empty should look again. About 20 ms: few wake-ups, small steps.
    func nanosecondsUntilRefilled(now: UInt64) -> UInt64 {
        var copy = self
        copy.refill(now)
        let wanted = Double(min(burst, max(1, bytesPerSecond / 50)))
        let missing = max(0, wanted - copy.tokens)
        let nanoseconds = UInt64((missing * 1_000_000_000 / Double(bytesPerSecond)).rounded(.up))
        return max(1_000_000, nanoseconds)
    }
}
