import Testing
@testable import ProxyServer

/// `TokenBucket` with a made-up clock: what a throttled direction may send, and when to look again.
@Suite struct TokenBucketTests {
    let ms: UInt64 = 1_000_000

    @Test("a new bucket holds its burst (50 ms of traffic), then refills at the rate")
    func burstThenRate() {
        var bucket = TokenBucket(bytesPerSecond: 100_000, now: 0)
        #expect(bucket.burst == 5_000)
        #expect(bucket.take(upTo: 1_000_000, now: 0) == 5_000)
        #expect(bucket.take(upTo: 1_000_000, now: 0) == 0)
        #expect(bucket.take(upTo: 1_000_000, now: 10 * ms) == 1_000)
        #expect(bucket.take(upTo: 300, now: 20 * ms) == 300)
        #expect(bucket.take(upTo: 1_000_000, now: 20 * ms) == 700)
    }

    @Test("an idle bucket fills only to its burst")
    func capped() {
        var bucket = TokenBucket(bytesPerSecond: 100_000, now: 0)
        _ = bucket.take(upTo: .max, now: 0)
        #expect(bucket.take(upTo: .max, now: 60_000 * ms) == 5_000)
    }

    @Test("over a long run the rate holds, whatever the size of the takes")
    func longRun() {
        var bucket = TokenBucket(bytesPerSecond: 125_000, now: 0)  // 1000 kbps
        var sent = 0
        var now: UInt64 = 0
        while now < 10_000 * ms {
            sent += bucket.take(upTo: 16_384, now: now)
            now += bucket.nanosecondsUntilRefilled(now: now)
        }
        #expect(abs(sent - 1_250_000 - bucket.burst) < 16_384)
    }

    @Test("an empty bucket says to look again when 20 ms of traffic is back, never sooner than 1 ms")
    func wakeUp() {
        var bucket = TokenBucket(bytesPerSecond: 100_000, now: 0)
        _ = bucket.take(upTo: .max, now: 0)
        #expect(bucket.nanosecondsUntilRefilled(now: 0) == 20 * ms)
        #expect(bucket.nanosecondsUntilRefilled(now: 15 * ms) == 5 * ms)
        #expect(bucket.nanosecondsUntilRefilled(now: 40 * ms) == 1 * ms)
        var slow = TokenBucket(bytesPerSecond: 10, now: 0)  // 0.08 kbps: one byte per 100 ms
        _ = slow.take(upTo: .max, now: 0)
        #expect(slow.nanosecondsUntilRefilled(now: 0) == 100 * ms)
    }

    @Test("a clock that goes backwards adds nothing")
    func backwards() {
        var bucket = TokenBucket(bytesPerSecond: 1_000, now: 1_000 * ms)
        _ = bucket.take(upTo: .max, now: 1_000 * ms)
        #expect(bucket.take(upTo: .max, now: 0) == 0)
    }
}
