import Foundation
import ProxyLog
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// Helpers for the `hookproxy replay` tests: a HAR recorded by hookproxy itself (an in-process proxy with its HAR
/// writer, real curl through it), hand-written HAR files for what recording cannot stage, and the replay binary.
enum Replay {
    /// What one `hookproxy replay` run printed and returned.
    struct Run {
        var status: Int32?
        var lines: [String]
        var stderr: String
        /// The request lines (the last stdout line is the summary).
        var requestLines: [String] { Array(lines.dropLast()) }
        var summary: String? { lines.last }
    }

    /// Records, at `path`, what `requests` sends through an in-process hookproxy (with `rules` when given).
    static func record(to path: String, rules yaml: String? = nil, in directory: TemporaryDirectory,
                       _ requests: (ProxyHarness) async throws -> Void) async throws {
        let store = try yaml.map { try Hooks.store(directory, $0) }
        let writer = try HARWriter(path: path, creatorVersion: "test")
        try await withProxy({
            $0.recorder = writer
            $0.captureBodies = true
            $0.rules = store
        }) { proxy in try await requests(proxy) }
    }

    /// Runs the built binary: `hookproxy replay ARGS…` in `directory`, waiting for it to end (bounded).
    static func run(_ arguments: [String], in directory: TemporaryDirectory,
                    timeout: Duration = .seconds(60)) async throws -> Run {
        let cli = try CLIProcess(CLITests.binary, ["replay"] + arguments, directory: directory.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: timeout)
        return Run(status: status, lines: cli.stdoutLines, stderr: cli.stderrText)
    }

    /// Starts the replay and hands back the process, for tests that act while it runs.
    static func start(_ arguments: [String], in directory: TemporaryDirectory) throws -> CLIProcess {
        try CLIProcess(CLITests.binary, ["replay"] + arguments, directory: directory.path)
    }

    /// A HAR file of GET (or the given) requests, recorded with the given status and size.
    static func har(_ requests: [(method: String, url: String, status: Int, size: Int, body: String?)]) -> String {
        let entries = requests.map { request -> String in
            let url = String(decoding: try! JSONEncoder().encode(request.url), as: UTF8.self)
            var postData = ""
            if let body = request.body {
                let text = String(decoding: try! JSONEncoder().encode(body), as: UTF8.self)
                postData = #","postData":{"mimeType":"text/plain","text":\#(text)}"#
            }
            return #"{"startedDateTime":"2025-01-01T00:00:00Z","time":1,"request":{"method":"\#(request.method)","url":\#(url),"httpVersion":"HTTP/1.1","cookies":[],"headers":[{"name":"X-Replayed","value":"yes"}],"queryString":[],"headersSize":-1,"bodySize":\#(request.body?.utf8.count ?? 0)\#(postData)},"response":{"status":\#(request.status),"statusText":"","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":\#(request.size),"mimeType":"text/plain"},"redirectURL":"","headersSize":-1,"bodySize":\#(request.size)},"cache":{},"timings":{"send":0,"wait":1,"receive":0}}"#
        }
        return #"{"log":{"version":"1.2","creator":{"name":"test","version":"1"},"entries":["# + "\n"
            + entries.joined(separator: "\n,") + "\n]}}\n"
    }
}
