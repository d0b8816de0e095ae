import Foundation
import ProxyServer
import ProxyTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a client sends while its CONNECT is still being set up (the target's connect pending) is not read without
/// bound: the request decoder stops at the CONNECT head and NIO's pipelining handler holds every read until the
/// answer (the 200) is written, so the rest waits in the kernel, where TCP's window holds the client back. A hostile
/// client streaming gigabytes at a blackholed target cannot grow the proxy until `--connect-timeout`. And what it sent
/// early still reaches the target once the connect succeeds.
///
/// The target is a listener whose accept queue is full (`StalledTarget`): the kernel drops the proxy's SYNs, so its
/// connect stays pending, retrying, until the queue is drained — on a loopback-only machine too.
@Suite("CONNECT set-up: the client is not read without bound", .timeLimit(.minutes(2)))
struct ConnectSetupBoundTests {
    @Test("a client streaming at a CONNECT whose connect is pending: the real binary reads and holds a bounded amount")
    func streamingWhileConnectPends() async throws {
        let target = try StalledTarget()
        defer { target.close() }
        let directory = try TemporaryDirectory()
        try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--connect-timeout", "60s", "--quiet"],
                                        directory: directory) { proxy in
            let pid = proxy.process.processIdentifier
            let port = try #require(Int(proxy.proxyURL.split(separator: ":").last ?? ""))
            let before = try #require(ProcessMeter(pid: pid))
            // A send that waits 2 s (SO_SNDTIMEO) throws: the proxy stopped taking bytes.
            let client = try await RawClient.connect(port: port, readTimeout: .seconds(2))
            defer { client.close() }
            try await client.send(rawRequest("CONNECT 127.0.0.1:\(target.port) HTTP/1.1", ["Host: 127.0.0.1:\(target.port)"]))
            let chunk = [UInt8](repeating: 0x78, count: 1024 * 1024)
            let cap = 200 * 1024 * 1024
            let deadline = ContinuousClock.now + .seconds(40)
            var sent = 0
            while sent < cap, ContinuousClock.now < deadline, (try? await client.send(chunk)) != nil { sent += chunk.count }
            let after = try #require(ProcessMeter(pid: pid))
            let read = after.bytesRead - before.bytesRead, grown = after.residentBytes - before.residentBytes
            print("CONNECT set-up bound: client sent \(sent >> 20) MiB; the proxy read \(read >> 10) KiB, RSS grew \(grown >> 10) KiB")
            #expect(target.stillStalled, "the target's queue drained: the connect did not stay pending")
            #expect(sent < cap, "the proxy took all \(cap >> 20) MiB while the CONNECT was pending")
            #expect(read < 16 * 1024 * 1024, "the proxy read \(read >> 20) MiB from a client whose tunnel is not up")
            #expect(grown < 64 * 1024 * 1024, "the proxy's RSS grew by \(grown >> 20) MiB")
            #expect(proxy.process.isRunning)
        }
    }

    @Test("bytes sent behind the CONNECT while its connect pends reach the target intact once it connects")
    func earlyBytesAfterPendingConnect() async throws {
        let target = try StalledTarget()
        defer { target.close() }
        try await withProxy({ $0.upstream.connectTimeoutMs = 30_000 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
            defer { client.close() }
            let early = pattern(count: 512 * 1024)
            let head = rawRequest("CONNECT 127.0.0.1:\(target.port) HTTP/1.1", ["Host: 127.0.0.1:\(target.port)"])
            // Sent from a task of its own: the proxy does not read all of it before the tunnel is up.
            let sending = Task { try await client.send(Array(head.utf8) + early) }
            try await Task.sleep(for: .milliseconds(1500))
            #expect(target.stillStalled, "the target's queue drained: the connect did not stay pending")
            // The queue drains: the proxy's next SYN gets through.
            let (upstream, first) = try await target.release(acceptTimeout: .seconds(15))
            defer { upstream.close() }
            let received = first + (first.count < early.count ? try await upstream.read(atLeast: early.count - first.count) : [])
            #expect(received.count == early.count, "the target got \(received.count) of \(early.count) early bytes")
            #expect(received == early, "\(patternMismatch(received, count: early.count))")
            try await sending.value
            let response = try await client.readResponse(method: "CONNECT")
            #expect(response.status == 200)
            try await upstream.send("pong")
            #expect(try await client.read(atLeast: 4) == Array("pong".utf8))
        }
    }
}

/// A process's bytes read (`/proc/PID/io` rchar: every read and recv) and resident memory (`/proc/PID/status`
/// VmRSS), at one instant.
struct ProcessMeter {
    let bytesRead: Int
    let residentBytes: Int

    init?(pid: Int32) {
        guard let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let rchar = Self.field("rchar:", in: io), let rss = Self.field("VmRSS:", in: status) else { return nil }
        bytesRead = rchar
        residentBytes = rss * 1024
    }

    private static func field(_ name: String, in text: String) -> Int? {
        text.split(separator: "\n").first { $0.hasPrefix(name) }
            .flatMap { Int($0.dropFirst(name.count).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") }
    }
}

/// A target whose connects stay pending: a listener with backlog 0 and one connection queued unaccepted, so the
/// kernel drops every later SYN (the connect retries, at 1 s, 3 s, 7 s…). A second connection (`probe`) shows it:
/// its connect stays in progress. `release` drains the queue and returns the next connection that brings bytes, with
/// its first bytes.
final class StalledTarget: @unchecked Sendable {
    private let listener: RawListener
    private var fillers: [Int32] = []
    var port: Int { listener.port }

    init() throws {
        listener = try RawListener(backlog: 0)
        for _ in 0..<2 { fillers.append(try Self.startConnect(to: listener.port)) }
        usleep(200_000)
    }

    /// Whether the probe's connect is still pending (the queue is still full).
    var stillStalled: Bool {
        guard let probe = fillers.last else { return false }
        var poller = pollfd(fd: probe, events: Int16(POLLOUT), revents: 0)
        return poll(&poller, 1, 0) == 0
    }

    /// Closes the fillers, takes what they left in the queue, and returns the first connection that sends bytes.
    func release(acceptTimeout: Duration) async throws -> (RawClient, [UInt8]) {
        closeFillers()
        let deadline = ContinuousClock.now + acceptTimeout
        while ContinuousClock.now < deadline {
            let connection = try await listener.accept(timeout: acceptTimeout, readTimeout: .seconds(10))
            let first = try await connection.read(atLeast: 1)
            if !first.isEmpty { return (connection, first) }
            connection.close()  // a filler's (closed by its client)
        }
        throw RawClient.Failure("no connection with bytes within \(acceptTimeout)")
    }

    func close() {
        closeFillers()
        listener.close()
    }

    private func closeFillers() {
        for fd in fillers { Glibc.close(fd) }
        fillers.removeAll()
    }

    /// A non-blocking connect to 127.0.0.1:`port`, left to complete (or not) in the kernel.
    private static func startConnect(to port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw RawClient.Failure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 || errno == EINPROGRESS else {
            Glibc.close(fd)
            throw RawClient.Failure("connect: \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
