import Foundation
import ProxyTestSupport
import NIOCore
import NIOPosix
@testable import ProxyServer
import Synchronization
import Testing

/// The CONNECT tunnel's name lookups run side by side on threads of their own, a bounded number at once (NIO's own
/// resolver ran one loop's lookups one after another, so a name stuck in DNS held every CONNECT behind it). Here the
/// lookup itself is a stand-in: names starting with `slow` wait until the test lets them fail.
@Suite("TunnelResolver: name lookups side by side", .timeLimit(.minutes(1)))
struct TunnelResolverTests {
    /// A stand-in for getaddrinfo: `slow…` names wait for `release()` (20 s at most) and fail; any other answers
    /// 127.0.0.1 at once. Every call is recorded.
    final class StandInDNS: Sendable {
        private let released = Atomic(false)
        private let calls = Mutex<[String]>([])

        var looked: [String] { calls.withLock { $0 } }
        func release() { released.store(true, ordering: .releasing) }

        @Sendable func lookup(host: String, port: Int) throws -> [SocketAddress] {
            calls.withLock { $0.append(host) }
            guard host.hasPrefix("slow") else { return [try SocketAddress(ipAddress: "127.0.0.1", port: port)] }
            let deadline = ContinuousClock.now + .seconds(20)
            while !released.load(ordering: .acquiring) && ContinuousClock.now < deadline { usleep(2000) }
            throw NameLookupError.failed(host: host, reason: "no answer")
        }
    }

    /// Both queries of one resolver, as Happy Eyeballs starts them (AAAA first).
    struct Lookup {
        let resolver: TunnelResolver
        let v6: Outcome
        let v4: Outcome

        init(_ host: String, lookups: NameLookups) {
            resolver = TunnelResolver(loop: MultiThreadedEventLoopGroup.singleton.next(), lookups: lookups)
            v6 = Outcome(resolver.initiateAAAAQuery(host: host, port: 443))
            v4 = Outcome(resolver.initiateAQuery(host: host, port: 443))
        }
    }

    /// What a future settled to, once it has.
    final class Outcome: Sendable {
        private let result = Mutex<Result<[SocketAddress], any Error>?>(nil)
        init(_ future: EventLoopFuture<[SocketAddress]>) {
            future.whenComplete { settled in self.result.withLock { $0 = settled } }
        }
        var settled: Bool { result.withLock { $0 != nil } }
        var addresses: [String]? { result.withLock { try? $0?.get() }?.compactMap(\.ipAddress) }
        var error: String? {
            result.withLock { result -> String? in
                guard case .failure(let error) = result else { return nil }
                return "\(error)"
            }
        }
    }

    @Test("six lookups that never end hold up no other; a cancelled one answers at once; all threads end")
    func stuckLookupsHoldUpNoOther() async throws {
        let dns = StandInDNS()
        let lookups = NameLookups(limit: 8, lookup: dns.lookup)
        let stuck = (0..<6).map { Lookup("slow\($0).test", lookups: lookups) }
        #expect(await eventually { lookups.running == 6 })

        let other = Lookup("fast.test", lookups: lookups)
        #expect(await eventually(timeout: .seconds(10)) { other.v4.settled && other.v6.settled }, "held up behind the stuck lookups")
        #expect(other.v4.addresses == ["127.0.0.1"])
        #expect(other.v6.addresses == [])

        // Happy Eyeballs gave up (or the client left): both queries answer now, the lookup still running.
        stuck[0].resolver.cancelQueries()
        #expect(await eventually(timeout: .seconds(10)) { stuck[0].v4.settled && stuck[0].v6.settled })
        #expect(stuck[0].v4.error == "lookup of slow0.test abandoned")
        #expect(stuck.dropFirst().allSatisfy { !$0.v4.settled })

        dns.release()
        #expect(await eventually(timeout: .seconds(5)) { stuck.allSatisfy { $0.v4.settled && $0.v6.settled } })
        #expect(stuck[1].v6.error == "cannot resolve slow1.test: no answer")
        #expect(await eventually(timeout: .seconds(5)) { lookups.running == 0 }, "a lookup thread did not end")
    }

    @Test("past the limit lookups wait their turn; one cancelled while waiting never runs")
    func pastTheLimitLookupsWait() async throws {
        let dns = StandInDNS()
        let lookups = NameLookups(limit: 2, lookup: dns.lookup)
        let stuck = (0..<2).map { Lookup("slow\($0).test", lookups: lookups) }
        #expect(await eventually { lookups.running == 2 && dns.looked.count == 2 })
        let dropped = Lookup("dropped.test", lookups: lookups)
        let waiting = Lookup("waiting.test", lookups: lookups)
        try await Task.sleep(for: .milliseconds(100))
        #expect(dns.looked.count == 2 && lookups.running == 2)
        #expect(!waiting.v4.settled)

        dropped.resolver.cancelQueries()
        #expect(await eventually(timeout: .seconds(10)) { dropped.v4.settled && dropped.v6.settled })
        #expect(dropped.v6.error == "lookup of dropped.test abandoned")

        dns.release()
        #expect(await eventually(timeout: .seconds(5)) { waiting.v4.settled && stuck.allSatisfy(\.v4.settled) })
        #expect(waiting.v4.addresses == ["127.0.0.1"])
        #expect(!dns.looked.contains("dropped.test"), "\(dns.looked)")
        #expect(await eventually(timeout: .seconds(5)) { lookups.running == 0 })
    }

    @Test("the system lookup answers localhost and an IP literal with the port asked for")
    func systemLookup() throws {
        let local = try NameLookups.getaddrinfo(host: "localhost", port: 8443)
        #expect(local.contains { $0.ipAddress == "127.0.0.1" && $0.port == 8443 }, "\(local)")
        let literal = try NameLookups.getaddrinfo(host: "127.0.0.1", port: 80)
        #expect(literal.contains { $0.ipAddress == "127.0.0.1" && $0.port == 80 }, "\(literal)")
        #expect(throws: NameLookupError.self) { try NameLookups.getaddrinfo(host: "no such host", port: 80) }
    }
}
