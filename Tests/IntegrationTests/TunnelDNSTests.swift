import Foundation
import ProxyTestSupport
import Testing

/// A CONNECT to a name whose DNS server never answers held every later CONNECT on its event loop, an IP literal's
/// too (found by a hostile tester): NIO looked every address up on one serial queue per loop, so six such names made
/// `CONNECT 127.0.0.1:PORT` wait out `--connect-timeout` and answer 502.
///
/// The real binary runs in a private mount namespace whose /etc/resolv.conf names a DNS server that never answers:
/// a socket this test binds on a loopback address, port 53, and never reads (root and `unshare` needed; skipped
/// without them).
@Suite("CONNECT tunnels: a name that never resolves", .timeLimit(.minutes(2)))
struct TunnelDNSTests {
    static let resolvConf = "/etc/resolv.conf"

    /// Whether this run may bind port 53 and swap resolv.conf in a private mount namespace.
    static let canSwapResolver = PrivateMounts.available(needing: [resolvConf])

    @Test("six CONNECTs to names stuck in DNS: an IP literal and localhost are answered at once; the stuck ones get 502 at --connect-timeout",
          .enabled(if: canSwapResolver, "needs root and unshare to point the proxy's resolver at a silent DNS server"))
    func stuckLookupsBlockNoOtherConnect() async throws {
        let binary = try #require(Hooks.executable, "the hookproxy binary is not built (.build/debug/hookproxy)")
        let dns = try SilentDNSServer()
        let directory = try TemporaryDirectory()
        // One attempt of 30 s: each stuck lookup outlasts the test's waits.
        let resolv = try directory.write("nameserver \(dns.address)\noptions timeout:30 attempts:1\n", to: "resolv.conf")
        _ = try directory.write("rules: []\n", to: "rules/empty.yaml")
        let upstream = try RawListener()
        let proxy = try HookproxyProcess(arguments: [], directory: directory)
        proxy.process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        proxy.process.arguments = ["-m", "--propagation", "private", "/bin/sh", "-c",
                                   "mount --bind '\(resolv)' \(Self.resolvConf) && exec '\(binary)' run --listen 127.0.0.1:0 "
                                   + "--rules '\(directory.path)/rules' --connect-timeout 5s"]
        defer { proxy.killNow() }
        try #require(try await proxy.start(), "hookproxy did not start: \(proxy.stdout) \(proxy.stderr)")
        let port = try #require(Int(proxy.proxyURL.split(separator: ":").last ?? ""))

        var stuck: [RawClient] = []
        for index in 0..<6 {
            let client = try await RawClient.connect(port: port, readTimeout: .seconds(15))
            try await client.send(rawRequest("CONNECT slow\(index).example:443 HTTP/1.1", ["Host: slow\(index).example:443"]))
            stuck.append(client)
        }
        #expect(await eventually(timeout: .seconds(5)) { dns.hasQueries }, "no lookup reached the silent DNS server")
        try await Task.sleep(for: .milliseconds(200))

        try await withThrowingTaskGroup(of: Void.self) { group in
            for target in ["127.0.0.1", "localhost"] {
                group.addTask {
                    let client = try await RawClient.connect(port: port, readTimeout: .seconds(8))
                    let started = ContinuousClock.now
                    try await client.send(rawRequest("CONNECT \(target):\(upstream.port) HTTP/1.1", ["Host: \(target):\(upstream.port)"]))
                    let response = try await client.readResponse(method: "CONNECT")
                    let took = ContinuousClock.now - started
                    #expect(response.status == 200, "CONNECT \(target): \(response.status) \(response.bodyText)")
                    // Behind the stuck lookups it would wait for --connect-timeout (5 s): the bound leaves a loaded machine room.
                    #expect(took < .milliseconds(4500), "CONNECT \(target) waited \(took) behind the stuck lookups")
                }
            }
            try await group.waitForAll()
        }

        // --connect-timeout still bounds a lookup that never ends.
        let refused = try await stuck[0].readResponse(method: "CONNECT")
        #expect(refused.status == 502, "\(refused.status) \(refused.bodyText)")
        for client in stuck { client.close() }
        #expect(proxy.process.isRunning)
        await proxy.stop()
    }
}

/// A DNS server that never answers: UDP and TCP sockets on port 53 of a loopback address of its own, never read
/// (queries pile up unanswered; the kernel completes TCP handshakes that nobody serves). Root only (port 53).
final class SilentDNSServer: @unchecked Sendable {
    let address: String
    private let udp: Int32
    private let tcp: Int32

    init() throws {
        var lastError = ""
        for _ in 0..<20 {
            let address = "127.53.\(Int.random(in: 1...254)).\(Int.random(in: 1...254))"
            let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0), tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if Self.bind(udp, address) && Self.bind(tcp, address) && listen(tcp, 64) == 0 {
                self.address = address
                self.udp = udp
                self.tcp = tcp
                return
            }
            lastError = String(cString: strerror(errno))
            close(udp)
            close(tcp)
        }
        throw RawClient.Failure("cannot bind a silent DNS server on 127.53.x.y:53: \(lastError)")
    }

    deinit {
        close(udp)
        close(tcp)
    }

    /// Whether a query arrived over UDP (and waits unread).
    var hasQueries: Bool {
        var waiting: Int32 = 0
        return ioctl(udp, UInt(FIONREAD), &waiting) == 0 && waiting > 0
    }

    private static func bind(_ fd: Int32, _ host: String) -> Bool {
        guard fd >= 0 else { return false }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(53).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
