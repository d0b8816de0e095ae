import NIOCore

/// One direction of a throttled exchange on its event loop: a `TokenBucket` and, while it is empty, the one
/// scheduled wake-up that tells the sender to try again. The wake-up holds the sender weakly (its closure does), so
/// a timer never keeps an exchange alive; `cancel` drops it when the exchange ends.
///
/// Not Sendable: used on `eventLoop` only.
final class Pacer {
    private var bucket: TokenBucket
    private let eventLoop: any EventLoop
    private var wake: Scheduled<Void>?

    init(bytesPerSecond: Int, eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: Pacer.now)
    }

    static var now: UInt64 { NIODeadline.now().uptimeNanoseconds }

    /// Whether a wake-up is pending: the bucket was found empty, and nothing may go until it fires.
    var isWaiting: Bool { wake != nil }

    /// How many of `count` bytes may go now. When fewer than `count` (0 included), `retry` runs on the loop once
    /// tokens are back (in about 20 ms); a sender waiting already gets 0 and no second wake-up.
    func allow(_ count: Int, retry: @escaping () -> Void) -> Int {
        guard wake == nil else { return 0 }
        let now = Pacer.now
        let allowed = bucket.take(upTo: count, now: now)
        if allowed < count {
            let delay = TimeAmount.nanoseconds(Int64(bucket.nanosecondsUntilRefilled(now: now)))
            wake = eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
                wake = nil
                retry()
            }
        }
        return allowed
    }

    func cancel() {
        wake?.cancel()
        wake = nil
    }
}
