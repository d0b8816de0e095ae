import Foundation
import ProxyTestSupport
import Testing

/// Issue 18, item 1, as a user runs it: `hookproxy run --reverse …` (the built binary, in a temporary directory that
/// is also its HOME, so the CA and the logs stay there), a TestOrigin upstream, the real curl.
@Suite("Reverse proxy: the command line (issue 18: 1)", .timeLimit(.minutes(3)))
struct ReverseCommandTests {
    static let binary = CLITests.binary

    @Test("run --reverse prints the listener after the listening line; the console and JSONL mark the exchange reverse")
    func endToEnd() async throws {
        let workdir = try TemporaryDirectory()
        let jsonl = workdir.path + "/flows.jsonl"
        try await withOrigin { origin in
            let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--jsonl", jsonl,
                                                   "--reverse", "127.0.0.1:0=http://127.0.0.1:\(origin.port)/echo"],
                                     directory: workdir.path)
            defer { cli.kill() }
            let prefix = "hookproxy reverse http://127.0.0.1:"
            let line = try #require(await cli.waitForLine { $0.hasPrefix(prefix) }, "stderr: \(cli.stderrText)")
            #expect(cli.stdoutLines.first?.hasPrefix("hookproxy listening on http://127.0.0.1:") == true, "\(cli.stdoutLines)")
            #expect(cli.stdoutLines.dropFirst().first == line)
            #expect(line.hasSuffix(" → http://127.0.0.1:\(origin.port)/echo"), "\(line)")
            let port = try #require(Int(line.dropFirst(prefix.count).prefix { $0.isNumber }), "\(line)")

            let response = try await Reverse.curl("http://127.0.0.1:\(port)/a?b=c")
            #expect(response.status == 200, "\(response.stderr)")
            #expect(response.header("X-Target") == "/echo/a?b=c")
            let url = "http://127.0.0.1:\(origin.port)/echo/a?b=c"
            let exchange = await cli.waitForLine { $0.contains(url) }
            #expect(exchange?.hasSuffix(" reverse") == true, "console: \(cli.stdoutLines)")

            cli.signal(SIGTERM)
            #expect(await cli.waitForExit(timeout: .seconds(10)) == 0, "stderr: \(cli.stderrText)")
            let logged = try String(contentsOfFile: jsonl, encoding: .utf8)
            let record = try #require(logged.split(separator: "\n").first.map { Data($0.utf8) })
            let object = try #require(try JSONSerialization.jsonObject(with: record) as? [String: Any])
            #expect(object["url"] as? String == url)
            let events = try #require(object["events"] as? [[String: Any]])
            #expect(events.first?["hook"] as? String == "reverse" && events.first?["action"] as? String == "reverse",
                    "\(events)")
        }
    }

    @Test("start-up errors: a malformed --reverse is a usage error (64), a port in use or an unusable --reverse-cert exits 1",
          arguments: ["malformed", "no-url", "port-in-use", "cert-missing", "cert-without-tls"])
    func startErrors(_ kind: String) async throws {
        let workdir = try TemporaryDirectory()
        try await withOrigin { origin in
            let arguments: [String]
            let expectedStatus: Int32
            let expected: String
            switch kind {
            case "malformed":
                (arguments, expectedStatus) = (["--reverse", "127.0.0.1=http://x.example"], 64)
                expected = "--reverse '127.0.0.1=http://x.example': the listen address '127.0.0.1' is not HOST:PORT"
            case "no-url":
                (arguments, expectedStatus) = (["--reverse", "127.0.0.1:9000"], 64)
                expected = "--reverse '127.0.0.1:9000': no '='"
            case "port-in-use":
                let value = "127.0.0.1:\(origin.port)=http://127.0.0.1:\(origin.port)"
                (arguments, expectedStatus) = (["--reverse", value], 1)
                expected = "hookproxy: --reverse \(value): cannot listen on 127.0.0.1:\(origin.port)"
            case "cert-missing":
                (arguments, expectedStatus) = (["--reverse", "127.0.0.1:0=https://localhost:1", "--reverse-cert", "nope.pem"], 1)
                expected = "hookproxy: --reverse-cert nope.pem: cannot read it"
            default:
                (arguments, expectedStatus) = (["--reverse", "127.0.0.1:0=http://localhost:1", "--reverse-cert", "x.pem"], 64)
                expected = "no --reverse listener speaks TLS"
            }
            let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0"] + arguments, directory: workdir.path)
            defer { cli.kill() }
            let status = await cli.waitForExit(timeout: .seconds(20))
            #expect(status == expectedStatus, "stdout: \(cli.stdoutLines) stderr: \(cli.stderrText)")
            #expect(cli.stderrText.contains(expected), "stderr: \(cli.stderrText)")
            #expect(!cli.stdoutLines.contains { $0.hasPrefix("hookproxy listening") }, "\(cli.stdoutLines)")
        }
    }
}
