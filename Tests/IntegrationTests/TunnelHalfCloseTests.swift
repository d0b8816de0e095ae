import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// A blind CONNECT tunnel carries half-closes both ways (found by a hostile tester): a client that sent its request and
/// shut its side down got nothing back, and an upstream that sent its greeting and shut its side down made the
/// client's next send fail. Once both directions have ended, hookproxy closes both connections.
@Suite("CONNECT tunnels: half-close", .timeLimit(.minutes(2)))
struct TunnelHalfCloseTests {
    static let size = 1 << 20

    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case halfClose, close
        var testDescription: String { rawValue }
    }

    @Test("the client half-closes: every byte reaches the upstream, the whole reply reaches the client, both close",
          arguments: [false, true], Ending.allCases)
    func clientHalfCloses(bytesBeforeThe200: Bool, upstreamEnding: Ending) async throws {
        let upstream = try RawListener()
        let request = pattern(count: Self.size), reply = pattern(count: Self.size, from: 7)
        try await withProxy { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
            let connect = Array(rawRequest("CONNECT 127.0.0.1:\(upstream.port) HTTP/1.1", ["Host: 127.0.0.1:\(upstream.port)"]).utf8)
            // The upstream reads to the client's end, then answers and ends its side too.
            async let upstreamSide: (received: [UInt8], connection: RawClient, sockets: [UInt64]) = {
                let connection = try await upstream.accept(readTimeout: .seconds(20))
                let sockets = try tunnelSockets(proxy: proxy, client: client, upstream: connection)
                let received = try await connection.readToEOF()
                try? await connection.send(reply)
                if upstreamEnding == .close { connection.close() } else { connection.shutdownWrite() }
                return (received, connection, sockets)
            }()
            if bytesBeforeThe200 {
                // All of it (and the end) before reading the 200: the end comes while the tunnel is being set up.
                try await client.send(connect + request)
                client.shutdownWrite()
                #expect(try await client.readResponse(method: "CONNECT").status == 200)
            } else {
                try await client.send(connect)
                #expect(try await client.readResponse(method: "CONNECT").status == 200)
                try await client.send(request)
                client.shutdownWrite()
            }
            let answer = try await client.readToEOF()
            let (received, connection, sockets) = try await upstreamSide
            #expect(isPattern(received, count: Self.size), "\(patternMismatch(received, count: Self.size))")
            #expect(isPattern(answer, count: Self.size, from: 7), "\(patternMismatch(answer, count: Self.size, from: 7))")
            // Closed by hookproxy while the upstream (half-closed) and the client still hold their ends.
            #expect(await eventually(timeout: .seconds(10)) { !sockets.contains(where: ProcessSockets.isOpen) },
                    "hookproxy kept a socket of the tunnel open")
            connection.close()
        }
    }

    @Test("the upstream half-closes: its bytes reach the client, the client's later bytes reach the upstream, both close")
    func upstreamHalfCloses() async throws {
        let upstream = try RawListener()
        let greeting = pattern(count: Self.size, from: 3), request = pattern(count: Self.size)
        try await withProxy { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
            // The upstream greets, ends its side, and goes on reading.
            async let upstreamSide: (received: [UInt8], connection: RawClient, sockets: [UInt64]) = {
                let connection = try await upstream.accept(readTimeout: .seconds(20))
                let sockets = try tunnelSockets(proxy: proxy, client: client, upstream: connection)
                try await connection.send(greeting)
                connection.shutdownWrite()
                return (try await connection.readToEOF(), connection, sockets)
            }()
            try await client.send(rawRequest("CONNECT 127.0.0.1:\(upstream.port) HTTP/1.1", ["Host: 127.0.0.1:\(upstream.port)"]))
            #expect(try await client.readResponse(method: "CONNECT").status == 200)
            let got = try await client.readToEOF()
            #expect(isPattern(got, count: Self.size, from: 3), "\(patternMismatch(got, count: Self.size, from: 3))")
            var sendError = ""
            do { try await client.send(request) } catch { sendError = "\(error)" }
            #expect(sendError.isEmpty, "the client could not send after the upstream's half-close: \(sendError)")
            client.shutdownWrite()
            let (received, connection, sockets) = try await upstreamSide
            #expect(isPattern(received, count: Self.size), "\(patternMismatch(received, count: Self.size))")
            #expect(await eventually(timeout: .seconds(10)) { !sockets.contains(where: ProcessSockets.isOpen) },
                    "hookproxy kept a socket of the tunnel open")
            connection.close()
        }
    }

    /// A review helper's find: once half-closes passed through, a client's close no longer closed the tunnel, and an
    /// upstream that never closes its side held both connections (and a --max-connections slot) for good.
    @Test("a half-closed tunnel that stays silent for --idle-timeout is closed; one still carrying bytes is not")
    func silentHalfOpenTunnelCloses() async throws {
        let upstream = try RawListener()
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 3000 }) { proxy in
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
            try await client.send(rawRequest("CONNECT 127.0.0.1:\(upstream.port) HTTP/1.1", ["Host: 127.0.0.1:\(upstream.port)"]))
            #expect(try await client.readResponse(method: "CONNECT").status == 200)
            let connection = try await upstream.accept(readTimeout: .seconds(20))
            defer { connection.close() }
            let sockets = try tunnelSockets(proxy: proxy, client: client, upstream: connection)
            client.shutdownWrite()
            // The upstream keeps its side open: a byte every 200 ms keeps the tunnel, for 4.5 s of a 3 s limit. Paced on
            // a thread of its own: the cooperative pool's sleeps once stretched past the limit in a loaded full run.
            try await connection.sendPaced(Array(0..<23), every: .milliseconds(200))
            #expect(try await client.read(atLeast: 23) == Array(0..<23), "the tunnel still carries bytes")
            // Then silence: both of hookproxy's sockets close.
            #expect(await eventually(timeout: .seconds(20)) { !sockets.contains(where: ProcessSockets.isOpen) },
                    "a silent half-open tunnel stayed open")
            #expect(await client.waitForClose())
        }
    }
}

/// hookproxy's two sockets of a tunnel (in this process: the harness runs it in-process), found by their ports while
/// the tunnel is open: its end of the client's connection and its end of the upstream's.
private func tunnelSockets(proxy: ProxyHarness, client: RawClient, upstream: RawClient) throws -> [UInt64] {
    let clientSide = try #require(ProcessSockets.inode(localPort: proxy.port, remotePort: client.localPort))
    let upstreamSide = try #require(ProcessSockets.inode(localPort: upstream.remotePort, remotePort: upstream.localPort))
    #expect(ProcessSockets.isOpen(clientSide) && ProcessSockets.isOpen(upstreamSide))
    return [clientSide, upstreamSide]
}

/// This process's TCP sockets, from /proc (Linux): which socket has a pair of ports, and whether a descriptor of this
/// process still refers to it.
enum ProcessSockets {
    /// The inode of the socket on 127.0.0.1 whose own port is `localPort` and whose peer's is `remotePort` (nil when
    /// /proc lists none, or only one already gone from its owner, inode 0).
    static func inode(localPort: Int, remotePort: Int) -> UInt64? {
        // Read to the end: String(contentsOfFile:) stops at the first page of a /proc file.
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp"),
              let data = try? file.readToEnd() else { return nil }
        try? file.close()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, port(fields[1]) == localPort, port(fields[2]) == remotePort,
                  let inode = UInt64(fields[9]), inode != 0 else { continue }
            return inode
        }
        return nil
    }

    /// Whether a descriptor of this process refers to socket `inode`.
    static func isOpen(_ inode: UInt64) -> Bool {
        let target = "socket:[\(inode)]"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == target }
    }

    private static func port(_ address: Substring) -> Int? {
        address.split(separator: ":").last.flatMap { Int($0, radix: 16) }
    }
}
