internal import CEpoll
import Glibc

/// The sockets one event loop's curl multi handle asked to watch: an epoll set of the loop's own.
///
/// The loop polls it without waiting (`poll`) while it is busy; while the loop sleeps, the `SocketWatcher` thread
/// waits on the set's descriptor (an epoll descriptor is itself ready when one of its sockets is) and wakes the loop.
/// Every socket is registered one-shot: the set reports it once, and the loop re-arms it after curl had its turn.
///
/// The set remembers what it registered, so that each change costs one `epoll_ctl`: a socket is added once and
/// modified after, and one that has fired (disarmed by the kernel) stays registered when it is let go, since it
/// cannot fire again until it is re-armed. A keep-alive request's upstream socket goes from curl's watch to the idle
/// connections' watch and back without leaving the set (strace: 4.5 `epoll_ctl` per request before, 2074 of them
/// failed). A socket closed meanwhile leaves the kernel's set by itself, and a new socket may get its number: the
/// verb the record picks can then fail, and the other one is tried.
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
    /// The sockets registered in the set, and whether each is armed (may still fire).
    private var registered: [Int32: Bool] = [:]

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
    func watch(_ socket: Int32, events: UInt32) -> Bool {
        let flags = events | hp_epolloneshot()
        let data = UInt64(UInt32(bitPattern: socket))
        let known = registered[socket] != nil
        let first = known ? hp_epoll_modify : hp_epoll_add
        // The record can be stale (the socket closed, its number reused): then the other verb is the right one.
        let second = known ? hp_epoll_add : hp_epoll_modify
        guard first(descriptor, socket, flags, data) == 0 || second(descriptor, socket, flags, data) == 0 else {
            registered.removeValue(forKey: socket)
            return false
        }
        registered[socket] = true
        return true
    }

    /// Stops watching `socket` (curl is done with it, or it leaves the idle watch). One that fired and was not
    /// re-armed cannot fire again and stays in the set, for the next `watch` to modify.
    func forget(_ socket: Int32) {
        guard registered[socket] == true else { return }
        registered.removeValue(forKey: socket)
        _ = hp_epoll_delete(descriptor, socket)
    }

    /// `socket` is about to be closed, and its number may come back as another socket's: the record goes (the
    /// kernel drops a closed socket from the set by itself), and an armed registration is deleted first.
    func closing(_ socket: Int32) {
        forget(socket)
        registered.removeValue(forKey: socket)
    }

    /// Calls `body` with each socket ready now, without waiting; returns how many there were (at most 256: the
    /// rest stay ready for the next poll).
    func poll(_ body: (Ready) -> Void) -> Int {
        let count = Int(max(0, hp_epoll_wait(descriptor, &events, &sockets, Int32(LoopSocketSet.capacity), 0)))
        for i in 0..<count {
            let socket = Int32(bitPattern: UInt32(truncatingIfNeeded: sockets[i]))
            registered[socket]? = false  // one-shot: disarmed until watched again
            body(Ready(socket: socket, events: events[i]))
        }
        return count
    }
}
