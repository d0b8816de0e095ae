#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex and its condition variable (Foundation's `NSCondition` without Foundation). Timed waits run on the
/// monotonic clock, so setting the system's time neither cuts a wait short nor stretches it. Thread-safe.
final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "hookproxy: cannot create a mutex")
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if os(Linux)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        precondition(pthread_cond_init(condition, &attributes) == 0, "hookproxy: cannot create a condition variable")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits for a signal (the lock held); may wake spuriously, as any condition variable.
    func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a signal until `deadline` (`Condition.now()` plus a span, in seconds); false when it passed.
    func wait(until deadline: Double) -> Bool {
        let whole = deadline.rounded(.down)
        var time = timespec(tv_sec: time_t(whole), tv_nsec: min(999_999_999, Int((deadline - whole) * 1_000_000_000)))
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }

    /// Seconds on the clock `wait(until:)` reads.
    static func now() -> Double {
        var time = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_MONOTONIC, &time)
        #else
        clock_gettime(CLOCK_REALTIME, &time)
        #endif
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1_000_000_000
    }
}
