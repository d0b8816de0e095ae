import Foundation
import ProxyTestSupport
import Testing

/// Issue 17 from the command line: `hookproxy run` serves the viewer by default, `--ui-flows` bounds it, `--no-ui`
/// turns it off.
@Suite("viewer: command line (issue 17)", .timeLimit(.minutes(3)))
struct ViewerCommandTests {
    static let binary = CLITests.binary

    /// Starts `hookproxy run --listen 127.0.0.1:0 ARGS` and returns it with its port.
    static func start(_ arguments: [String], in directory: TemporaryDirectory) async throws -> (CLIProcess, Int) {
        let cli = try CLIProcess(binary, ["run", "--listen", "127.0.0.1:0", "--quiet", "--ca-dir", directory.path + "/ca"] + arguments,
                                 directory: directory.path)
        let prefix = "hookproxy listening on http://127.0.0.1:"
        let line = try #require(await cli.waitForLine { $0.hasPrefix(prefix) }, "stderr: \(cli.stderrText)")
        return (cli, try #require(Int(line.dropFirst(prefix.count))))
    }

    static func status(_ url: String) async throws -> (status: String, body: String) {
        let result = try await CurlCLI.run(["-s", "-S", "--noproxy", "*", "-w", "\n%{http_code}", url])
        let text = result.stdoutText
        let cut = text.lastIndex(of: "\n") ?? text.endIndex
        return (String(text[cut...].dropFirst()), String(text[..<cut]))
    }

    @Test("run serves the viewer by default and keeps the last --ui-flows exchanges")
    func uiFlows() async throws {
        let directory = try TemporaryDirectory()
        let (cli, port) = try await Self.start(["--ui-flows", "2"], in: directory)
        defer { cli.kill() }
        try await withOrigin { origin in
            for index in 0..<3 {
                let result = try await CurlCLI.run(["-s", "-o", "/dev/null", "-x", "http://127.0.0.1:\(port)", "\(origin.baseURL)/bytes/\(index)"])
                #expect(result.exitCode == 0)
            }
        }
        var flows: [[String: Any]] = []
        _ = await eventually(timeout: .seconds(10)) {
            let answer = try? await Self.status("http://127.0.0.1:\(port)/api/flows")
            flows = (answer.flatMap { try? JSONSerialization.jsonObject(with: Data($0.body.utf8)) } as? [[String: Any]]) ?? []
            return flows.count == 2 && flows.allSatisfy { $0["state"] as? String == "done" }
        }
        #expect(flows.compactMap { ($0["url"] as? String)?.split(separator: "/").last } == ["1", "2"])
        #expect(try await Self.status("http://127.0.0.1:\(port)/").status == "200")
        cli.signal(SIGTERM)
        #expect(await cli.waitForExit(timeout: .seconds(10)) == 0, "stderr: \(cli.stderrText)")
    }

    @Test("run --no-ui: /api/* answers 404, the small page stays")
    func noUI() async throws {
        let directory = try TemporaryDirectory()
        let (cli, port) = try await Self.start(["--no-ui"], in: directory)
        defer { cli.kill() }
        #expect(try await Self.status("http://127.0.0.1:\(port)/api/flows").status == "404")
        let page = try await Self.status("http://127.0.0.1:\(port)/")
        #expect(page.status == "200")
        #expect(page.body.contains("/ca.pem"))
        cli.signal(SIGTERM)
        #expect(await cli.waitForExit(timeout: .seconds(10)) == 0)
    }

    /// 2^62 or more overflowed the change log's size (`maxFlows * 2`) and stopped the process (found by a review).
    @Test("--ui-flows must be between 1 and 10000000: 0, a negative, and 2^62 get a usage error, not a crash",
          arguments: ["0", "-5", "4611686018427387904", "10000001"])
    func uiFlowsValidated(_ value: String) async throws {
        let directory = try TemporaryDirectory()
        let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--ui-flows=\(value)"], directory: directory.path)
        defer { cli.kill() }
        let status = await cli.waitForExit(timeout: .seconds(10))
        #expect(status == 64, "a usage error: \(String(describing: status)) \(cli.stderrText)")
        #expect(cli.stderrText.contains("--ui-flows must be between 1 and 10000000"), "\(cli.stderrText)")
    }
}
