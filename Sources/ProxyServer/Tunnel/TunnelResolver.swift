import FoundationEssentials
import Glibc
import NIOCore
import NIOPosix
import ProxyModel
import Synchronization

/// Resolves a CONNECT target's name for NIO's Happy Eyeballs connect, on `NameLookups`' threads: one lookup runs
/// beside the others. NIO's own resolver runs every lookup of an event loop on one serial queue, so a name whose
/// DNS server never answers held every later CONNECT on that loop (an IP literal's too) until it gave up.
///
/// Single use, like NIO's: one `getaddrinfo` answers both queries. `cancelQueries` (Happy Eyeballs gave up, or the
/// client left) answers both at once with an error; a lookup still queued then never runs, one already running
/// finishes on its thread and its answer is dropped.
final class TunnelResolver: Resolver, Sendable {
    private let loop: any EventLoop
    private let lookups: NameLookups
    private let v4: EventLoopPromise<[SocketAddress]>
    private let v6: EventLoopPromise<[SocketAddress]>
    private let job = Mutex<NameLookups.Job?>(nil)

    init(loop: any EventLoop, lookups: NameLookups = .shared) {
        self.loop = loop
        self.lookups = lookups
        self.v4 = loop.makePromise()
        self.v6 = loop.makePromise()
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        start(host: host, port: port)
        return v4.futureResult
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        start(host: host, port: port)
        return v6.futureResult
    }

    func cancelQueries() {
        guard let job = job.withLock({ $0 }) else { return }
        job.finish(.failure(NameLookupError.abandoned(host: job.host)))
    }

    private func start(host: String, port: Int) {
        let created: NameLookups.Job? = job.withLock { job in
            guard job == nil else { return nil }
            let (loop, v4, v6) = (self.loop, self.v4, self.v6)
            job = NameLookups.Job(host: host, port: port) { result in
                // Both in one turn of the loop, as NIO's resolver does: Happy Eyeballs sees them together.
                loop.execute {
                    switch result {
                    case .success(let addresses):
                        v6.succeed(addresses.filter { $0.protocol == .inet6 })
                        v4.succeed(addresses.filter { $0.protocol == .inet })
                    case .failure(let error):
                        v6.fail(error)
                        v4.fail(error)
                    }
                }
            }
            return job
        }
        if let created { lookups.submit(created) }
    }
}

/// Runs name lookups (`getaddrinfo`, which blocks) on threads of their own, up to `limit` at once; more wait in
/// order. A thread is started for a lookup when fewer than `limit` run, and ends when none waits. One per process:
/// the bound is on the process's threads. Thread-safe.
final class NameLookups: Sendable {
    typealias Lookup = @Sendable (_ host: String, _ port: Int) throws -> [SocketAddress]

    /// At most 32 lookups at once: a lookup whose DNS server does not answer holds its thread until the resolver
    /// gives up (resolv.conf's timeout × attempts, 10 s by default), so 32 such names are needed to make a 33rd
    /// wait; a lookup that waits longer than `--connect-timeout` is dropped unrun.
    static let shared = NameLookups(limit: 32)

    /// One lookup and what to do with its answer, done once: by the lookup, or earlier by a cancel.
    final class Job: Sendable {
        let host: String
        let port: Int
        private let completion: Mutex<(@Sendable (Result<[SocketAddress], any Error>) -> Void)?>

        init(host: String, port: Int, completion: @escaping @Sendable (Result<[SocketAddress], any Error>) -> Void) {
            self.host = host
            self.port = port
            self.completion = Mutex(completion)
        }

        /// Answers, unless answered already.
        func finish(_ result: Result<[SocketAddress], any Error>) {
            completion.withLock { completion in
                defer { completion = nil }
                return completion
            }?(result)
        }

        var isFinished: Bool { completion.withLock { $0 == nil } }
    }

    private struct State {
        var waiting: [Job] = []
        var next = 0
        var running = 0
    }

    let limit: Int
    private let lookup: Lookup
    private let state = Mutex(State())

    init(limit: Int, lookup: @escaping Lookup = NameLookups.getaddrinfo) {
        self.limit = limit
        self.lookup = lookup
    }

    /// Lookups running now (for tests).
    var running: Int { state.withLock { $0.running } }

    func submit(_ job: Job) {
        let startThread = state.withLock { state in
            state.waiting.append(job)
            guard state.running < limit else { return false }
            state.running += 1
            return true
        }
        guard startThread, !DetachedThread.start({ [self] in work() }) else { return }
        // No thread to be had (the process's or the user's limit): this lookup fails now rather than wait for
        // a thread that may never come; the ones running go on with the rest of the queue.
        state.withLock { $0.running -= 1 }
        job.finish(.failure(NameLookupError.failed(host: job.host, reason: "no thread for the lookup")))
    }

    /// Runs waiting lookups until none is left (a cancelled one is skipped), then ends the thread.
    private func work() {
        while let job = take() {
            guard !job.isFinished else { continue }
            let result = Result { try lookup(job.host, job.port) }
            job.finish(result)
        }
    }

    private func take() -> Job? {
        state.withLock { state in
            guard state.next < state.waiting.count else {
                state.waiting.removeAll(keepingCapacity: true)
                state.next = 0
                state.running -= 1
                return nil
            }
            let job = state.waiting[state.next]
            state.next += 1
            if state.next > 64 && state.next * 2 > state.waiting.count {
                state.waiting.removeFirst(state.next)
                state.next = 0
            }
            return job
        }
    }

    /// The system's resolver, as NIO's own uses it: stream sockets over TCP, IPv6 and IPv4 answers in its order.
    @Sendable static func getaddrinfo(host: String, port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var info: UnsafeMutablePointer<addrinfo>?
        let status = Glibc.getaddrinfo(host, String(port), &hints, &info)
        guard status == 0 else {
            throw NameLookupError.failed(host: host, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(info) }
        var addresses: [SocketAddress] = []
        var next = info
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET:
                    addresses.append(SocketAddress(address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }, host: host))
                case AF_INET6:
                    addresses.append(SocketAddress(address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }, host: host))
                default:
                    break
                }
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }
}

/// Why a name lookup gave no addresses.
enum NameLookupError: Error, CustomStringConvertible {
    /// `getaddrinfo` failed (an unknown name, a DNS server that did not answer in time, …).
    case failed(host: String, reason: String)
    /// Nobody waits for it any more (the connect timed out, or the client left).
    case abandoned(host: String)

    var description: String {
        switch self {
        case .failed(let host, let reason): "cannot resolve \(host): \(reason)"
        case .abandoned(let host): "lookup of \(host) abandoned"
        }
    }
}
