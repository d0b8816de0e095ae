import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

// Helpers shared by the issue-3 (rules, hot reload) and issue-6 (traffic log) integration tests. Real sockets only:
// a TestOrigin (or the GzipOrigin below) on 127.0.0.1:0, hookproxy in-process or as the built binary on 127.0.0.1:0,
// the real curl binary as the client.

/// A value behind a lock, shared with callbacks on other threads.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
    func mutate(_ body: (inout Value) -> Void) { lock.lock(); body(&stored); lock.unlock() }
}

// MARK: an origin that answers gzip

/// A tiny HTTP/1.1 origin on 127.0.0.1:0 whose every answer is 200 with `Content-Encoding: gzip` and the gzip of
/// `GzipOrigin.plainText` (TestOrigin has no compressed route). Stopped by `with`.
enum GzipOrigin {
    static let plainText = "hello world from a gzip origin\n"
    /// `gzip.compress(plainText, mtime=0)`.
    static let gzipBytes: [UInt8] = [
        31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 203, 72, 205, 201, 201, 87, 40, 207, 47, 202, 73, 81, 72, 43, 202, 207, 85,
        72, 84, 72, 175, 202, 44, 80, 200, 47, 202, 76, 207, 204, 227, 2, 0, 222, 60, 167, 143, 31, 0, 0, 0,
    ]

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain")
            headers.add(name: "Content-Encoding", value: "gzip")
            headers.add(name: "Content-Length", value: String(GzipOrigin.gzipBytes.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                          promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: GzipOrigin.gzipBytes)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// Starts the origin, runs `body` with its port, and closes it (and every connection) afterwards.
    static func with<T>(_ body: (Int) async throws -> T) async throws -> T {
        let children = LockedBox<[any Channel]>([])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                children.mutate { $0.append(channel) }
                return channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        func stop() async {
            try? await server.close()
            for child in children.value { child.close(promise: nil) }
        }
        do {
            let port = try #require(server.localAddress?.port)
            let result = try await body(port)
            await stop()
            return result
        } catch {
            await stop()
            throw error
        }
    }
}

// MARK: the hookproxy binary

/// The built `hookproxy` binary running as a child process (stdout and stderr go to files, read at any time).
/// `stop()` / `killNow()` must be called in every path: use `HookproxyProcess.with`.
final class HookproxyProcess: @unchecked Sendable {
    let process = ChildProcess()
    let stdoutPath: String
    let stderrPath: String
    /// `http://127.0.0.1:PORT` from the listening line (empty when it never came).
    private(set) var proxyURL = ""

    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// The binary, or nil (then the test records an issue).
    static var executable: String? { Hooks.executable }

    init(arguments: [String], environment: [String: String] = [:], directory: TemporaryDirectory) throws {
        let executable = try #require(Self.executable, "build hookproxy first (swift build)")
        let id = UUID().uuidString.prefix(8)
        stdoutPath = directory.path + "/hookproxy-\(id).out"
        stderrPath = directory.path + "/hookproxy-\(id).err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (name, value) in environment { env[name] = value }
        process.environment = env
        process.currentDirectoryURL = directory.url
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
    }

    /// Starts it and waits (bounded) for `hookproxy listening on http://127.0.0.1:PORT`; returns false when the
    /// process exited (or never printed the line) instead.
    func start(timeout: Duration = .seconds(20)) async throws -> Bool {
        try process.run()
        let found = await eventually(timeout: timeout, interval: .milliseconds(20)) {
            stdout.contains("\n") || !process.isRunning
        }
        guard found, let line = stdout.split(separator: "\n").first,
              line.hasPrefix("hookproxy listening on http://127.0.0.1:") else { return false }
        proxyURL = String(line.dropFirst("hookproxy listening on ".count))
        return true
    }

    /// Waits (bounded) for the process to exit by itself; kills it when it does not. Returns its exit status.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(15)) async -> Int32 {
        _ = await eventually(timeout: timeout, interval: .milliseconds(20)) { !process.isRunning }
        if process.isRunning { _ = kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGTERM, then (bounded) SIGKILL. Returns the exit status. Safe to call when it already ended or never started.
    @discardableResult
    func stop() async -> Int32 {
        guard process.processIdentifier != 0 else { return -1 }
        if process.isRunning { _ = kill(process.processIdentifier, SIGTERM) }
        return await waitForExit(timeout: .seconds(10))
    }

    /// SIGKILL now (no chance to flush or close anything).
    func killNow() {
        guard process.processIdentifier != 0, process.isRunning else { return }
        _ = kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts the binary with `arguments`, runs `body` once it listens, and always stops it.
    static func with<T>(_ arguments: [String], environment: [String: String] = [:], directory: TemporaryDirectory,
                        _ body: (HookproxyProcess) async throws -> T) async throws -> T {
        let child = try HookproxyProcess(arguments: arguments, environment: environment, directory: directory)
        do {
            let listening = try await child.start()
            try #require(listening, "hookproxy did not start: \(child.stdout) \(child.stderr)")
            let result = try await body(child)
            await child.stop()
            return result
        } catch {
            await child.stop()
            throw error
        }
    }

    /// `curl -s -S -i -x PROXY URL …` through this process (bounded).
    func curl(_ url: String, _ extra: [String] = []) async throws -> CurlResponse {
        let result = try await CurlCLI.run(
            ["-s", "-S", "-i", "--max-time", "20", "-H", "Expect:", "-x", proxyURL] + extra + [url],
            timeout: .seconds(30))
        return CurlResponse(result)
    }
}


// MARK: reading the log files

enum LogFiles {
    /// The HAR's `log.entries`, or nil when the file is not (yet) valid JSON of that shape.
    static func harEntries(_ path: String) -> [[String: Any]]? {
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let log = object["log"] as? [String: Any] else { return nil }
        return log["entries"] as? [[String: Any]]
    }

    /// Every complete JSONL line, parsed (a line that does not parse is returned as nil so the test can fail on it).
    static func jsonlLines(_ path: String) -> [[String: Any]?] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Waits (bounded) until the HAR holds at least `count` entries; returns them.
    static func waitForHAR(_ path: String, count: Int, timeout: Duration = .seconds(10)) async -> [[String: Any]] {
        _ = await eventually(timeout: timeout, interval: .milliseconds(20)) { (harEntries(path)?.count ?? 0) >= count }
        return harEntries(path) ?? []
    }

    /// Waits (bounded) until the JSONL file holds at least `count` lines; returns them.
    static func waitForJSONL(_ path: String, count: Int, timeout: Duration = .seconds(10)) async -> [[String: Any]?] {
        _ = await eventually(timeout: timeout, interval: .milliseconds(20)) { jsonlLines(path).count >= count }
        return jsonlLines(path)
    }

    /// The venv python `make pydeps` prepares (haralyzer and jsonschema).
    static var python: String { Hooks.repositoryRoot + "/.build/pyvenv/bin/python3" }

    /// Validates the HAR at `path` against the HAR 1.2 schema and reads it back with haralyzer. Returns what
    /// haralyzer saw (one object per entry), or records an issue with the checker's output.
    static func checkHAR(_ path: String, directory: TemporaryDirectory) async throws -> [[String: Any]] {
        try #require(FileManager.default.isExecutableFile(atPath: python),
                     "no \(python): run `make pydeps` (make test does)")
        let schema = try directory.write(HARSchema.json, to: "har-schema.json")
        let script = try directory.write(HARSchema.checker, to: "har-check.py")
        let (status, out, err) = try await Hooks.run(python, [script, schema, path], timeout: .seconds(60))
        try #require(status == 0, "HAR check failed: \(err)")
        let parsed = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]]
        return try #require(parsed)
    }

    /// The SPEC's JSONL keys (every one present in every line).
    static let jsonlKeys = ["id", "start", "client", "method", "url", "upstream_url", "http_version", "upstream_http_version", "status",
                            "request_headers", "response_headers", "request_body_size", "response_body_size",
                            "request_body", "response_body", "truncated", "timings", "rules", "events", "error"]
    static let timingKeys = ["dns", "connect", "tls", "first_byte", "total"]
}

