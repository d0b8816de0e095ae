import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// A client through TLS interception that stops and keeps its socket open is let go at `--idle-timeout`, as a plain
/// one is: closed through the pipeline, NIOSSL waited up to 5 s more for a close_notify such a client never sends
/// (`ImmediateClose`). The client is Python's `ssl` (`Scripts/tls_stalled_client.py`), in a process of its own.
@Suite("Intercepted clients that stop are let go at --idle-timeout, not 5 s later", .timeLimit(.minutes(3)))
struct ImmediateCloseTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/tls_stalled_client.py").path
    static let idleTimeoutMs = 1000

    /// Runs the client in `mode` against `localhost:port` through `proxy`; returns how long after it stopped (or after
    /// `startWhen` held) the proxy held its connection (nil when that took over 40 s).
    static func heldAfterStalling(_ proxy: ProxyHarness, caPath: String, port: Int, mode: String,
                                  startWhen: @escaping @Sendable () -> Bool = { true }) async throws -> Duration? {
        let directory = try TemporaryDirectory()
        let output = directory.path + "/out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = ChildProcess()
        let stdin = Pipe()
        process.executableURL = URL(fileURLWithPath: LogFiles.python)
        process.arguments = [script, String(proxy.port), "localhost", String(port), caPath, mode]
        process.standardInput = stdin
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        try process.run()
        defer {
            try? stdin.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        let text = { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        let stalled = await eventually(timeout: .seconds(20)) { text().contains("stalled") || !process.isRunning }
        guard stalled, process.isRunning else { throw TestSupportError("the client did not stall: \(text())") }
        // Both instants are taken on a thread of its own: polled on the cooperative pool, which other tests of a full
        // run can block, the close was once seen 3.9 s late.
        let port = proxy.port
        return await timeOnThread(timeout: .seconds(40), from: startWhen, until: { SocketCensus.count(localPort: port) == 0 })
    }

    @Test("a download the client stops reading")
    func stoppedDownload() async throws {
        try await withOrigin(tls: TestCA.shared.identity([TestCA.shared.leaf, TestCA.shared.intermediate])) { origin in
            try await withInterceptingProxy({ $0.limits.clientIdleTimeoutMs = Self.idleTimeoutMs }) { proxy, caPath in
                let held = try await Self.heldAfterStalling(proxy, caPath: caPath, port: origin.port, mode: "download")
                // --idle-timeout, plus up to an eighth of it between checks; 5 s more before.
                #expect(held.map { $0 < .milliseconds(4 * Self.idleTimeoutMs) } == true, "held for \(String(describing: held))")
            }
        }
    }

    /// Also found by the review: the lingering close's bound was checked once per --idle-timeout, and the TLS
    /// close_notify, acknowledged after the lingering began, counted as progress at the first check: the client was
    /// held two timeouts (4 s at 2 s). It is checked every quarter now.
    @Test("an upload-first client answered early (lingering close) that keeps its socket open")
    func lingeringUpload() async throws {
        let refusing = try RefusingPort()
        try await withInterceptingProxy({ $0.limits.clientIdleTimeoutMs = 4000 }) { proxy, caPath in
            // Counted from the 502 (the lingering close begins after it), not from the client's stall: on a loaded
            // machine the refused connect and the answer took a second and more (a fresh-clone run measured 4.06 s
            // at 2 s). At 4 s the right answer (1¼ timeouts: 5 s) and the old faults (two timeouts, 8 s; or 5 s
            // more for TLS, 9 s) stand 2 s apart whatever the load (the full suite measured 3.57 s for 2.5 at 2 s).
            let held = try await Self.heldAfterStalling(proxy, caPath: caPath, port: refusing.port, mode: "upload") {
                proxy.recorder.records.contains { $0.response?.status == 502 }
            }
            #expect(held.map { $0 < .milliseconds(7000) } == true, "held for \(String(describing: held)) with --idle-timeout 4s")
        }
    }
}
