import Foundation
import Testing

/// An instrument, off unless `HOOKPROXY_POOL_HOG` is set: tasks that block threads of Swift's cooperative pool
/// (2 threads on 2 cores) for 1.3 s at a time, over and over, as the suite's CPU-bound synchronous tests do in a full
/// run on a loaded machine. A test that only passes while the pool answers within a second (an await between two
/// steps the proxy times at a short `--idle-timeout`) fails beside it on demand, not once in five full runs:
/// `HOOKPROXY_POOL_HOG=1 swift test --filter 'PoolHog|TheSuite'`. The value is how long it hogs, in seconds (a
/// number over 1; 40 otherwise): `HOOKPROXY_POOL_HOG=150` covers most of a full run.
@Suite("instrument: a starved cooperative pool", .enabled(if: ProcessInfo.processInfo.environment["HOOKPROXY_POOL_HOG"] != nil))
struct PoolHogTests {
    static var seconds: Int {
        let value = Int(ProcessInfo.processInfo.environment["HOOKPROXY_POOL_HOG"] ?? "") ?? 0
        return value > 1 ? value : 40
    }

    @Test("blocks a pool thread for 1.3 s at a time, for HOOKPROXY_POOL_HOG seconds", arguments: [0, 1])
    func hog(_ thread: Int) async {
        let end = ContinuousClock.now + .seconds(Self.seconds)
        while ContinuousClock.now < end {
            usleep(1_300_000)  // blocks the pool's thread, as a CPU-bound test does
            await Task.yield()
        }
    }
}
