internal import CEpoll
import Glibc

/// The sockets one event loop's curl multi handle asked to watch: an epoll set of the loop's own.
///
/// The loop polls it without waiting (`poll`) while it is busy; while the loop sleeps, the `SocketWatcher` thread
/// waits on the set's descriptor (an epoll descriptor is itself ready when one of its sockets is) and wakes the loop.
/// Every socket is registered one-shot: the set reports it once, and the loop re-arms it after curl had its turn.
///
/// Used on its loop only; the watcher only registers `descriptor` in its own set.
final class LoopSocketSet {
    /// A socket the set found ready, and its epoll events.
    struct Ready {
        var socket: Int32
        var events: UInt32
    }

    let descriptor: Int32
    private static let capacity = 256
    private var events = [UInt32](repeating: 0, count: LoopSocketSet.capacity)
    private var sockets = [UInt64](repeating: 0, count: LoopSocketSet.capacity)

    /// Nil when the kernel gives no epoll descriptor (the process is out of file descriptors).
    init?() {
        descriptor = hp_epoll_create()
        if descriptor < 0 { return nil }
    }

    deinit {
        close(descriptor)
    }

    /// Watches `socket` for `events` (EPOLLIN/EPOLLOUT bits) once, or re-arms it. False when the kernel refused
    /// (the socket is gone).
    @discardableResult
    func watch(_ socket: Int32, events: UInt32, isNew: Bool) -> Bool {
        let flags = events | hp_epolloneshot()
        let data = UInt64(UInt32(bitPattern: socket))
        let first = isNew ? hp_epoll_add : hp_epoll_modify
        if first(descriptor, socket, flags, data) == 0 { return true }
        // curl may reuse a descriptor number we still hold, or hand back one we dropped: try the other verb.
        let second = isNew ? hp_epoll_modify : hp_epoll_add
        return second(descriptor, socket, flags, data) == 0
    }

    /// Stops watching `socket` (curl is done with it; closing it would also drop it from the set).
    func forget(_ socket: Int32) {
        _ = hp_epoll_delete(descriptor, socket)
    }

    /// Calls `body` with each socket ready now, without waiting; returns how many there were (at most 256: the
    /// rest stay ready for the next poll).
    func poll(_ body: (Ready) -> Void) -> Int {
        let count = Int(max(0, hp_epoll_wait(descriptor, &events, &sockets, Int32(LoopSocketSet.capacity), 0)))
        for i in 0..<count {
            body(Ready(socket: Int32(bitPattern: UInt32(truncatingIfNeeded: sockets[i])), events: events[i]))
        }
        return count
    }
}
