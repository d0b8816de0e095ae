import Foundation
import Synchronization

/// Runs the real `/usr/bin/curl` binary, as a user would. Any thread.
public enum CurlCLI {
    /// What one run produced.
    public struct Result: Sendable {
        /// curl's exit status (a killed curl reports -1).
        public var exitCode: Int32
        public var stdout: [UInt8]
        public var stderr: String
        /// Whether the run was killed after `timeout`.
        public var timedOut: Bool
        /// stdout as UTF-8 text.
        public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    }

    public static let executable = "/usr/bin/curl"

    /// Runs `curl args…` (no shell), waits at most `timeout`, kills curl if it runs longer.
    /// Proxy variables are removed from curl's environment so only explicit `-x` flags apply.
    public static func run(_ args: [String], timeout: Duration = .seconds(30)) async throws -> Result {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        var environment = ProcessInfo.processInfo.environment
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                     "no_proxy", "NO_PROXY", "CURL_HOME"] {
            environment[name] = nil
        }
        environment["HOME"] = NSTemporaryDirectory()  // no ~/.curlrc
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()

        // Drain both pipes on their own threads so a large output never blocks curl.
        let stdoutData = PipeDrain(output.fileHandleForReading)
        let stderrData = PipeDrain(errors.fileHandleForReading)

        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var timedOut = false
        while process.isRunning {
            if clock.now >= deadline {
                timedOut = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        process.waitUntilExit()
        let out = await stdoutData.wait(), err = await stderrData.wait()
        return Result(exitCode: timedOut ? -1 : process.terminationStatus, stdout: Array(out),
                      stderr: String(decoding: err, as: UTF8.self), timedOut: timedOut)
    }
}

/// Reads a pipe to its end on a dedicated thread; `wait` suspends (never blocks a pool thread) until then.
private final class PipeDrain: Sendable {
    private let state = Mutex<(data: Data?, waiter: CheckedContinuation<Data, Never>?)>((nil, nil))

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            let data = Data(PipeReading.readAll(handle))
            let waiter = state.withLock { state in
                state.data = data
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: data)
        }
    }

    /// Suspends until end of file (the writer has exited or been killed by then).
    func wait() async -> Data {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Data? in
                if state.data == nil { state.waiter = continuation }
                return state.data
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
