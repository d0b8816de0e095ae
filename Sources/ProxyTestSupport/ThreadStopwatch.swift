import Foundation
import Synchronization

/// Times the gap between two conditions, both polled every 5 ms on a thread of its own: how long after `start`
/// first held `end` first held (nil when that did not happen within `timeout`). `eventually` polls on Swift's
/// cooperative pool, two threads on a two-core machine; in a full parallel run another test blocking both (a
/// `waitUntilExit`) delayed its polls by seconds, and a 5 s close was once measured as 8.9 s.
public func timeOnThread(timeout: Duration, from start: @escaping @Sendable () -> Bool,
                         until end: @escaping @Sendable () -> Bool) async -> Duration? {
    let result = StopwatchResult()
    let thread = Thread {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var began: ContinuousClock.Instant?
        var held: Duration?
        while clock.now < deadline {
            if began == nil, start() { began = clock.now }
            if let began, end() {
                held = clock.now - began
                break
            }
            usleep(5000)
        }
        result.finish(held)
    }
    thread.start()
    while !result.done { try? await Task.sleep(for: .milliseconds(20)) }
    return result.held
}

/// What the stopwatch's thread found, handed to the waiting task.
private final class StopwatchResult: Sendable {
    private let state = Mutex<(done: Bool, held: Duration?)>((false, nil))
    var done: Bool { state.withLock { $0.done } }
    var held: Duration? { state.withLock { $0.held } }
    func finish(_ held: Duration?) { state.withLock { $0 = (true, held) } }
}
