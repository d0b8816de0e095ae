internal import CEpoll
import Glibc
import Synchronization

/// Tells each event loop's curl multi handle when one of its sockets is ready, so that curl's I/O runs on the loop.
///
/// SwiftNIO has no public way to add a descriptor it does not own to an event loop's selector, so the sockets curl
/// asks to watch go into one epoll set, and one thread does nothing but wait on it: a ready socket is handed to its
/// loop (`EventLoop.execute`, batched per wake-up), where `curl_multi_socket_action` reads or writes it. Every
/// socket is registered one-shot: the kernel reports it once, and its loop re-arms it after curl had its turn, so
/// the waiting thread never spins while a busy loop catches up.
///
/// Registration calls (`watch`, `forget`) come from the loops; `epoll_ctl` is thread-safe.
final class SocketWatcher: Sendable {
    /// A ready socket, as the waiting thread reports it: which loop engine, which descriptor, which events.
    struct Ready {
        var socket: Int32
        var events: UInt32
    }

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

    /// Watches `socket` for `events` (EPOLLIN/EPOLLOUT bits) once, for the engine at `index`. Re-arms it if it was
    /// reported already. Returns false when the kernel refused (the socket is gone).
    @discardableResult
    func watch(_ socket: Int32, events: UInt32, index: UInt32, isNew: Bool) -> Bool {
        let flags = events | hp_epolloneshot()
        let data = UInt64(index) << 32 | UInt64(UInt32(bitPattern: socket))
        let first = isNew ? hp_epoll_add : hp_epoll_modify
        if first(epoll, socket, flags, data) == 0 { return true }
        // curl may reuse a descriptor number we still hold, or hand back one we dropped: try the other verb.
        let second = isNew ? hp_epoll_modify : hp_epoll_add
        return second(epoll, socket, flags, data) == 0
    }

    /// Stops watching `socket` (curl is done with it; closing it would also drop it from the set).
    func forget(_ socket: Int32) {
        _ = hp_epoll_delete(epoll, socket)
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
        var batches: [UInt32: [Ready]] = [:]
        waiting: while true {
            let count = hp_epoll_wait(epoll, &events, &datas, Int32(capacity), -1)
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in 0..<Int(count) {
                let data = datas[i]
                if data == SocketWatcher.wakeupToken { break waiting }
                let ready = Ready(socket: Int32(bitPattern: UInt32(truncatingIfNeeded: data)), events: events[i])
                batches[UInt32(truncatingIfNeeded: data >> 32), default: []].append(ready)
            }
            let known = engines.withLock { $0 }
            for (index, ready) in batches where Int(index) < known.count {
                known[Int(index)].socketsReady(ready)
            }
            batches.removeAll(keepingCapacity: true)
        }
        engines.withLock { $0.removeAll() }  // breaks the engines' references back to this watcher
        let waiters = state.withLock { state in
            state.started = false
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
