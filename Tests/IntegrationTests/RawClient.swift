import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client for byte-level HTTP tests: it sends exactly the bytes a test writes and parses responses
/// itself, so tests can send what no well-behaved client would (pipelined requests, malformed heads, conflicting
/// framing). Every read is bounded by `SO_RCVTIMEO` (and an overall deadline); nothing blocks forever.
///
/// The public API is async: each blocking call runs on its own thread, so Swift's cooperative pool never waits
/// on a socket. One task uses a client at a time.
final class RawClient: @unchecked Sendable {
    /// One parsed HTTP response.
    struct Response: Sendable {
        var version: String
        var status: Int
        var reason: String
        /// Header fields in the order received, names in their case.
        var headers: [(name: String, value: String)]
        /// The raw head, status line to the empty line.
        var rawHead: String
        var body: [UInt8]
        var bodyText: String { String(decoding: body, as: UTF8.self) }

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        func headerValues(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    private var fd: Int32
    /// Bytes read but not consumed yet.
    private var buffer: [UInt8] = []
    /// Whether the peer closed its side (a read returned 0).
    private(set) var sawEOF = false
    let readTimeout: Duration

    private init(fd: Int32, readTimeout: Duration) {
        self.fd = fd
        self.readTimeout = readTimeout
    }

    deinit { closeNow() }

    /// Connects to 127.0.0.1:`port`. `readTimeout` bounds each wait for bytes. `receiveBuffer` sets `SO_RCVBUF`
    /// before the connect (so the window it announces is small from the start): a client that stops reading then
    /// holds back only that much.
    static func connect(port: Int, readTimeout: Duration = .seconds(10), receiveBuffer: Int? = nil) async throws -> RawClient {
        try await blocking { try connectNow(port: port, readTimeout: readTimeout, receiveBuffer: receiveBuffer) }
    }

    /// Connects and sends `first` on one thread, with no suspension between: under a short `--idle-timeout`, a
    /// cooperative pool kept busy by other tests could otherwise hold the test between the two for longer than the
    /// proxy waits for a silent connection (it closes it, and the request is never read).
    static func connect(port: Int, readTimeout: Duration = .seconds(10), receiveBuffer: Int? = nil,
                        sending first: String) async throws -> RawClient {
        try await blocking {
            let client = try connectNow(port: port, readTimeout: readTimeout, receiveBuffer: receiveBuffer)
            try client.sendNow(Array(first.utf8))
            return client
        }
    }

    private static func connectNow(port: Int, readTimeout: Duration, receiveBuffer: Int?) throws -> RawClient {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let client = RawClient(fd: fd, readTimeout: readTimeout)
        let seconds = readTimeout.components.seconds
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(readTimeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw Failure("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        return client
    }

    /// Runs `script` against this client on one thread of its own: a sequence of steps that must follow each other
    /// without a pause a starved cooperative pool could stretch (each async call above is a suspension).
    func run<T: Sendable>(_ script: @escaping @Sendable (RawClient) throws -> T) async throws -> T {
        try await RawClient.blocking { try script(self) }
    }

    // MARK: sending

    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) async throws {
        try await RawClient.blocking { try self.sendNow(bytes) }
    }

    /// Sends `bytes` one at a time, `interval` apart, paced on a thread of its own: the cooperative pool's sleeps
    /// stretch by seconds on a loaded machine, a thread's much less.
    func sendPaced(_ bytes: [UInt8], every interval: Duration) async throws {
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        try await RawClient.blocking {
            for byte in bytes {
                Thread.sleep(forTimeInterval: seconds)
                try self.sendNow([byte])
            }
        }
    }

    /// Sends every byte (the synchronous step, for `run` scripts).
    func sendNow(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure("send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    // MARK: receiving

    /// Reads and parses one response. `method` is the request's (HEAD responses have no body). Interim 1xx
    /// responses are returned like any other.
    func readResponse(method: String = "GET") async throws -> Response {
        try await RawClient.blocking { try self.readResponseNow(method: method) }
    }

    /// Reads until the peer closes (bounded by `limit` bytes and the read timeout); returns everything read.
    func readToEOF(limit: Int = 64 * 1024 * 1024) async throws -> [UInt8] {
        try await RawClient.blocking {
            while !self.sawEOF && self.buffer.count < limit { try self.fill() }
            defer { self.buffer.removeAll() }
            return self.buffer
        }
    }

    /// Reads at least `count` bytes (fewer only if the peer closes first) and returns them.
    func read(atLeast count: Int) async throws -> [UInt8] {
        try await RawClient.blocking { try self.readNow(atLeast: count) }
    }

    /// `read(atLeast:)`, the synchronous step (for `run` scripts).
    func readNow(atLeast count: Int) throws -> [UInt8] {
        while buffer.count < count && !sawEOF { try fill() }
        let taken = Array(buffer.prefix(max(count, buffer.count)))
        buffer.removeAll()
        return taken
    }

    /// What one `recv` of at most `limit` bytes brings (what is buffered already, if anything is); empty once the peer
    /// closed. A reader that takes little at a time.
    func readSomeNow(upTo limit: Int) throws -> [UInt8] {
        if buffer.isEmpty && !sawEOF { try fill(upTo: limit) }
        defer { buffer.removeAll() }
        return buffer
    }

    /// Reads a request head, to its empty line (what is left of the read stays buffered).
    func readHeadNow() throws -> String {
        while findEmptyLine() == nil && !sawEOF { try fill() }
        let end = findEmptyLine().map { $0 + 4 } ?? buffer.count
        defer { buffer.removeFirst(end) }
        return String(decoding: buffer[0..<end], as: UTF8.self)
    }

    private func findEmptyLine() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// Reads until the peer closes or `deadline` passes, at most `step` bytes per `recv`, pausing `pause` after each
    /// while `slowUntil` has not passed: a slow reader, paced on a thread of its own (a loaded machine stretches a
    /// task's sleeps, not a thread's much).
    func readPaced(step: Int, pause: Duration, slowUntil: ContinuousClock.Instant,
                   deadline: ContinuousClock.Instant) async throws -> [UInt8] {
        try await RawClient.blocking {
            try self.readPacedNow(step: step, pause: pause, slowUntil: slowUntil, deadline: deadline)
        }
    }

    /// `readPaced`, the synchronous step (for `run` scripts).
    func readPacedNow(step: Int, pause: Duration, slowUntil: ContinuousClock.Instant,
                      deadline: ContinuousClock.Instant) throws -> [UInt8] {
        var received = buffer
        buffer.removeAll()
        while !sawEOF, ContinuousClock.now < deadline {
            try fill(upTo: step)
            received += buffer
            buffer.removeAll()
            if ContinuousClock.now < slowUntil {
                Thread.sleep(forTimeInterval: Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18)
            }
        }
        return received
    }

    /// Whether the peer closed the connection within the read timeout (bytes still arriving are discarded).
    func waitForClose() async -> Bool {
        (try? await RawClient.blocking { () throws -> Bool in
            while !self.sawEOF {
                self.buffer.removeAll()
                try self.fill()
            }
            return true
        }) ?? false
    }

    func close() { closeNow() }

    /// Shrinks `SO_RCVBUF` on the connected socket: below the window already announced, the kernel then drops what
    /// arrives past the new size, and the sender retransmits into it (a peer gone from the network looks the same).
    func shrinkReceiveBuffer(to size: Int32) {
        var size = size
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Half-closes: `shutdown(SHUT_WR)` sends a FIN; reading goes on.
    func shutdownWrite() {
        guard fd >= 0 else { return }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// The port of this socket's own end (what the peer sees as the remote port).
    var localPort: Int { RawClient.port(of: fd, peer: false) }
    /// The port of the peer's end.
    var remotePort: Int { RawClient.port(of: fd, peer: true) }

    private static func port(of fd: Int32, peer: Bool) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
            }
        }
        return result == 0 ? Int(UInt16(bigEndian: address.sin_port)) : -1
    }

    /// Closes abortively (SO_LINGER 0): the peer gets an RST at once, even when this side's unsent bytes would hold
    /// a FIN back behind them.
    func reset() {
        guard fd >= 0 else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        closeNow()
    }

    private func closeNow() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// One `recv`: appends what arrived; sets `sawEOF` on 0; throws on a timeout or an error.
    private func fill(upTo limit: Int = 256 * 1024) throws {
        guard fd >= 0 else { throw Failure("read on a closed client") }
        var chunk = [UInt8](repeating: 0, count: limit)
        let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if got > 0 {
            buffer.append(contentsOf: chunk[0..<got])
        } else if got == 0 {
            sawEOF = true
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
            throw Failure("read timed out after \(readTimeout) (have \(buffer.count) bytes: \(String(decoding: buffer.prefix(200), as: UTF8.self)))")
        } else if errno == ECONNRESET {
            sawEOF = true
        } else {
            throw Failure("recv: \(String(cString: strerror(errno)))")
        }
    }

    private func readLine() throws -> String {
        while true {
            if let index = findCRLF() {
                let line = String(decoding: buffer[0..<index], as: UTF8.self)
                buffer.removeFirst(index + 2)
                return line
            }
            if sawEOF { throw Failure("connection closed before a complete line (have \(buffer.count) bytes)") }
            try fill()
        }
    }

    private func findCRLF() -> Int? {
        guard buffer.count >= 2 else { return nil }
        for i in 0..<(buffer.count - 1) where buffer[i] == 13 && buffer[i + 1] == 10 { return i }
        return nil
    }

    private func take(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            if sawEOF { throw Failure("connection closed after \(buffer.count) of \(count) body bytes") }
            try fill()
        }
        let taken = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return taken
    }

    /// Reads and parses one response (the synchronous step, for `run` scripts).
    func readResponseNow(method: String = "GET") throws -> Response {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw Failure("bad status line '\(statusLine)'")
        }
        var rawHead = statusLine + "\r\n"
        var headers: [(name: String, value: String)] = []
        while true {
            let line = try readLine()
            rawHead += line + "\r\n"
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw Failure("bad header line '\(line)'") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = Response(version: String(parts[0]), status: status, reason: parts.count > 2 ? String(parts[2]) : "",
                                headers: headers, rawHead: rawHead, body: [])
        if method == "HEAD" || (method == "CONNECT" && (200..<300).contains(status)) || status == 204 || status == 304 || (100..<200).contains(status) { return response }
        if let te = response.header("transfer-encoding"), te.lowercased().contains("chunked") {
            var body: [UInt8] = []
            while true {
                let sizeLine = try readLine()
                guard let size = Int((sizeLine.split(separator: ";").first ?? "").trimmingCharacters(in: .whitespaces), radix: 16) else {
                    throw Failure("bad chunk size line '\(sizeLine)'")
                }
                if size == 0 {
                    while try !readLine().isEmpty {}  // trailers
                    break
                }
                body += try take(size)
                _ = try take(2)
            }
            response.body = body
        } else if let length = response.header("content-length").flatMap({ Int($0) }) {
            response.body = try take(length)
        } else {
            while !sawEOF { try fill() }
            response.body = buffer
            buffer.removeAll()
        }
        return response
    }

    /// Runs `body` on a new thread and waits for it without occupying a cooperative thread.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}

/// A listening TCP socket on 127.0.0.1 (a free port) whose connections are `RawClient`s: a byte-level upstream for
/// tests that need what a NIO server does not do by default (half-closes). Every wait is bounded.
final class RawListener: @unchecked Sendable {
    private var fd: Int32
    let port: Int

    /// `backlog` is `listen`'s: 0 lets one connection wait unaccepted, and the kernel drops the SYNs of later ones
    /// (their connects stay pending, retrying) until it is accepted. `receiveBuffer`: `SO_RCVBUF` of the accepted
    /// connections (set before `listen`, so the window they announce fits it), for a server that buffers little.
    init(backlog: Int32 = 16, receiveBuffer: Int32? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClient.Failure("socket: \(String(cString: strerror(errno)))") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                bind(fd, sockaddr, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, sockaddr, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw RawClient.Failure("bind/listen 127.0.0.1:0: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// The next connection, within `timeout`; its reads are bounded by `readTimeout`.
    func accept(timeout: Duration = .seconds(10), readTimeout: Duration = .seconds(10)) async throws -> RawClient {
        try await RawClient.blocking { try self.acceptNow(timeout: timeout, readTimeout: readTimeout) }
    }

    /// Accepts the next connection and runs `script` on it, on a thread started now: a server that answers a
    /// handshake at once, however long the cooperative pool keeps the test from awaiting it (a proxy waiting for the
    /// answer under a short `--idle-timeout` gives up after it). Await `value` for the script's result.
    func serving<T: Sendable>(timeout: Duration = .seconds(10), readTimeout: Duration = .seconds(10),
                              _ script: @escaping @Sendable (RawClient) throws -> T) -> ThreadJob<T> {
        ThreadJob { try script(self.acceptNow(timeout: timeout, readTimeout: readTimeout)) }
    }

    private func acceptNow(timeout: Duration, readTimeout: Duration) throws -> RawClient {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&poller, 1, milliseconds) == 1 else { throw RawClient.Failure("no connection within \(timeout)") }
        let connection = Glibc.accept(fd, nil, nil)
        guard connection >= 0 else { throw RawClient.Failure("accept: \(String(cString: strerror(errno)))") }
        return RawClient.adopting(connection, readTimeout: readTimeout)
    }
}

/// Work running on a thread of its own from the moment it is made; `value` waits for it without holding a thread
/// of the cooperative pool.
final class ThreadJob<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, any Error>?
    private var waiter: CheckedContinuation<T, any Error>?

    init(_ work: @escaping @Sendable () throws -> T) {
        Thread.detachNewThread { [self] in
            let outcome = Result { try work() }
            lock.lock()
            result = outcome
            let waiting = waiter
            waiter = nil
            lock.unlock()
            waiting?.resume(with: outcome)
        }
    }

    var value: T {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                lock.lock()
                if let result {
                    lock.unlock()
                    continuation.resume(with: result)
                } else {
                    waiter = continuation
                    lock.unlock()
                }
            }
        }
    }
}

extension RawClient {
    /// A client over a connected socket (one a `RawListener` accepted), with its reads and writes bounded.
    static func adopting(_ fd: Int32, readTimeout: Duration) -> RawClient {
        let seconds = readTimeout.components.seconds
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(readTimeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return RawClient(fd: fd, readTimeout: readTimeout)
    }
}

/// A request head with CRLFs, e.g. `rawRequest("GET http://h/ HTTP/1.1", ["Host: h"])`.
func rawRequest(_ requestLine: String, _ headers: [String] = [], body: String = "") -> String {
    ([requestLine] + headers).joined(separator: "\r\n") + "\r\n\r\n" + body
}
