import Glibc
@testable import ProxyUpstream
import Testing

/// The loop's epoll set picks the `epoll_ctl` verb from what it registered: one call per change, and a socket let go
/// after it fired stays registered (it cannot fire again until re-armed). Found with strace: a keep-alive request
/// cost 4.5 `epoll_ctl`, an ADD that failed with EEXIST before every MOD among them.
@Suite("The loop's socket set")
struct LoopSocketSetTests {
    /// A connected pair of stream sockets; closed by the caller.
    static func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
            throw Failure("socketpair: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static let readable: UInt32 = 0x001  // EPOLLIN (Glibc does not export the epoll constants)

    /// The sockets ready now.
    static func ready(_ set: LoopSocketSet) -> [Int32] {
        var found: [Int32] = []
        _ = set.poll { found.append($0.socket) }
        return found
    }

    static func write(_ fd: Int32) { var byte: UInt8 = 1; _ = Glibc.write(fd, &byte, 1) }
    static func drain(_ fd: Int32) { var byte: UInt8 = 0; _ = Glibc.read(fd, &byte, 1) }

    /// Runs `body` with a new set that watches `a`, one end of a fresh socket pair, for input; `b` is the other end.
    static func watchingOneEnd(_ body: (LoopSocketSet, Int32, Int32) throws -> Void) throws {
        let set = try #require(LoopSocketSet())
        let (a, b) = try socketPair()
        defer { close(a); close(b) }
        #expect(set.watch(a, events: readable))
        try body(set, a, b)
    }

    @Test("a socket fires once per watch; let go after it fired and watched again, it fires again")
    func oneShotAndRewatch() throws {
        try Self.watchingOneEnd { set, a, b in
            Self.write(b)
            #expect(Self.ready(set) == [a])
            #expect(Self.ready(set).isEmpty, "one-shot: reported once")
            set.forget(a)  // it fired: stays registered, disarmed
            #expect(set.watch(a, events: Self.readable), "re-armed with the verb the set chose")
            #expect(Self.ready(set) == [a], "the byte is still unread: ready again")
            Self.drain(a)
        }
    }

    @Test("a socket let go while still armed reports nothing after, and can be watched again")
    func forgetArmed() throws {
        try Self.watchingOneEnd { set, a, b in
            set.forget(a)
            Self.write(b)
            #expect(Self.ready(set).isEmpty, "an armed socket let go is deleted from the set")
            #expect(set.watch(a, events: Self.readable))
            #expect(Self.ready(set) == [a])
        }
    }

    @Test("a watched socket's number taken by a new socket behind the set's back: the new socket is watched")
    func numberReusedAfterClose() throws {
        try Self.watchingOneEnd { set, a, b in
            Self.write(b)
            #expect(Self.ready(set) == [a])
            // `a` now names another socket (dup2 closes the old one, which leaves the kernel's set; the set's record
            // stays), with no moment where another test's descriptor could take the number.
            let (c, d) = try Self.socketPair()
            defer { close(d) }
            #expect(dup2(c, a) == a)
            close(c)
            #expect(set.watch(a, events: Self.readable), "the stale record's MOD fails and ADD is tried")
            Self.write(d)
            #expect(Self.ready(set) == [a])
        }
    }

    @Test("a socket the set is told is closing is deleted, armed as it was")
    func closing() throws {
        try Self.watchingOneEnd { set, a, b in
            set.closing(a)
            Self.write(b)
            #expect(Self.ready(set).isEmpty)
        }
    }
}
