internal import CEpoll
import Glibc
import Synchronization

/// Wakes an event loop that sleeps while one of its curl sockets becomes ready, where the kernel cannot
/// (`LoopSetAlarm` is the first choice; this thread serves when the kernel refuses AIO).
///
/// SwiftNIO has no public way to add a descriptor it does not own to an event loop's selector. So each loop keeps
/// curl's sockets in an epoll set of its own (`LoopSocketSet`), which it polls itself, without waiting, while it is
/// busy: under load a request never changes thread. When the loop finds nothing more and would sleep, and it has no
/// alarm, it hands the set to this watcher: one thread that waits on every handed-over set and wakes the set's loop
/// (`EventLoop.execute`) when the set has something ready. Each set is registered one-shot, so the watcher wakes
/// its loop once, and the loop hands the set back when it goes idle again.
///
/// Registration calls (`arm`, `forget`) come from the loops; `epoll_ctl` is thread-safe.
final class SocketWatcher: Sendable {
    private let epoll: Int32
    private let wakeup: Int32
    /// The loop engines, by the index in the upper half of each registration's data.
    private let engines = Mutex<[LoopEngine]>([])
    private let state = Mutex<(started: Bool, stopped: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, false, []))
    private static let wakeupToken = UInt64.max

    init() {
        epoll = hp_epoll_create()
        wakeup = hp_eventfd()
        precondition(epoll >= 0 && wakeup >= 0, "hookproxy: cannot create the upstream socket watcher (out of file descriptors)")
        _ = hp_epoll_add(epoll, wakeup, hp_epollin(), SocketWatcher.wakeupToken)
    }

    deinit {
        close(epoll)
        close(wakeup)
    }

    /// Makes `engine` known under a new index and starts the waiting thread on first use. Any thread.
    /// Once stopped, nothing is kept: the watcher and its engines refer to each other only while the thread runs.
    func register(_ engine: LoopEngine) -> UInt32 {
        // Under the state lock: an engine is kept only before `stop`, and the thread clears them after it.
        let (index, start) = state.withLock { state -> (UInt32, Bool) in
            guard !state.stopped else { return (UInt32.max, false) }
            let index = engines.withLock { engines in
                engines.append(engine)
                return UInt32(engines.count - 1)
            }
            defer { state.started = true }
            return (index, !state.started)
        }
        if start { startThread() }
        return index
    }

    /// Whether the waiting thread runs (it starts at the first `register`).
    var threadRunning: Bool { state.withLock { $0.started } }

    /// Waits on `set` for the engine at `index` until one of its sockets is ready, then wakes that engine once.
    /// Re-arms it if it was reported already.
    func arm(_ set: LoopSocketSet, index: UInt32) {
        let flags = hp_epollin() | hp_epolloneshot()
        if hp_epoll_modify(epoll, set.descriptor, flags, UInt64(index)) != 0 {
            _ = hp_epoll_add(epoll, set.descriptor, flags, UInt64(index))
        }
    }

    /// Stops waiting on `set` (its engine stopped).
    func forget(_ set: LoopSocketSet) {
        _ = hp_epoll_delete(epoll, set.descriptor)
    }

    /// Asks the waiting thread to end, and returns at once. Any thread; call once or more.
    func stop() {
        let running = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return state.started && !state.stopped
        }
        if running {
            var one: UInt64 = 1
            _ = write(wakeup, &one, 8)
        }
    }

    /// Ends the waiting thread and returns once it has ended (at once if it never started). Any task.
    func shutdown() async {
        stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                // Not started, or already ended (the thread clears `started` on its way out).
                if state.started { state.waiters.append(continuation) }
                return !state.started
            }
            if done { continuation.resume() }
        }
    }

    // MARK: - the waiting thread

    private func startThread() {
        let box = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            let watcher = Unmanaged<SocketWatcher>.fromOpaque(argument!).takeRetainedValue()
            watcher.run()
            return nil
        }, box)
        precondition(created == 0, "hookproxy: cannot start the upstream socket watcher thread (errno \(created))")
        pthread_detach(thread)
    }

    private func run() {
        hp_set_thread_name("hookproxy-socks")
        let capacity = 256
        var events = [UInt32](repeating: 0, count: capacity)
        var datas = [UInt64](repeating: 0, count: capacity)
        var woken: [UInt32] = []
        waiting: while true {
            let count = hp_epoll_wait(epoll, &events, &datas, Int32(capacity), -1)
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in 0..<Int(count) {
                if datas[i] == SocketWatcher.wakeupToken { break waiting }
                woken.append(UInt32(truncatingIfNeeded: datas[i]))
            }
            let known = engines.withLock { $0 }
            for index in woken where Int(index) < known.count {
                known[Int(index)].wake()
            }
            woken.removeAll(keepingCapacity: true)
        }
        engines.withLock { $0.removeAll() }  // breaks the engines' references back to this watcher
        let waiters = state.withLock { state in
            state.started = false
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
