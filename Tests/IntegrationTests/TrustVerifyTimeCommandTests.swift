import Foundation
import ProxyRules
import ProxyTestSupport
import Testing

/// Issue 18, item 4, through the built binary: `hookproxy check` and start-up refuse a malformed `verify_time`
/// naming the file, line and value; `hookproxy run --verify-time` checks dates at that instant end to end.
@Suite("trust verify_time on the command line (issue 18)", .timeLimit(.minutes(2)))
struct TrustVerifyTimeCommandTests {
    static let binary = repositoryRoot().appendingPathComponent(".build/debug/hookproxy").path

    static func rule(verifyTime: String) -> String {
        """
        rules:
          - name: clock
            match: { host: t.test }
            trust:
              verify_time: \(verifyTime)

        """
    }

    @Test("check rejects a malformed verify_time with file:line:col, the rule and the bad value", arguments: [
        "2031-01-01", "2031-13-01T00:00:00Z", "2031-02-29T00:00:00Z", "2031-01-01T00:00:00+02:00",
        "2031-01-01 00:00:00", "tomorrow",
    ])
    func checkRejectsMalformed(value: String) async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(Self.rule(verifyTime: "\"\(value)\""), to: "rules/clock.yaml")
        let location = "\(file):5:20: "

        let report = RuleLoader.check(paths: [directory.path + "/rules"], environment: [:])
        #expect(report.exitCode == 1)
        let failure = report.standardError
        #expect(failure.contains(location), "\(failure)")
        #expect(failure.contains("rule 'clock': 'trust.verify_time' '\(value)' is not a UTC instant"), "\(failure)")
        #expect(failure.contains("e.g. 2031-01-01T00:00:00Z"), "\(failure)")

        let cli = try CLIProcess(Self.binary, ["check", "--rules", directory.path + "/rules"], directory: directory.path)
        defer { cli.kill() }
        #expect(await cli.waitForExit(timeout: .seconds(20)) == 1, "stderr: \(cli.stderrText)")
        #expect(cli.stderrText.contains(location), "stderr: \(cli.stderrText)")
        #expect(cli.stderrText.contains("'\(value)' is not a UTC instant"), "stderr: \(cli.stderrText)")
        #expect(!cli.stdoutLines.contains { $0.hasPrefix("ok:") })
    }

    @Test("check accepts a well-formed verify_time, quoted or not")
    func checkAcceptsInstant() async throws {
        for value in ["2031-01-01T00:00:00Z", "\"2031-01-01T00:00:00.5z\"", "2031-01-01T00:00:00+00:00"] {
            let directory = try TemporaryDirectory()
            try directory.write(Self.rule(verifyTime: value), to: "rules/clock.yaml")
            let report = RuleLoader.check(paths: [directory.path + "/rules"], environment: [:])
            #expect(report.exitCode == 0, "\(value): \(report.standardError)")
        }
    }

    @Test("start-up: a malformed verify_time in a rule, or a malformed --verify-time, stops hookproxy run with the reason")
    func runRefusesMalformed() async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(Self.rule(verifyTime: "2031-01-01T25:00:00Z"), to: "rules/clock.yaml")
        let badRule = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules"],
                                     directory: directory.path)
        defer { badRule.kill() }
        #expect(await badRule.waitForExit(timeout: .seconds(20)) == 1, "stderr: \(badRule.stderrText)")
        #expect(badRule.stderrText.contains("\(file):5:20: rule 'clock': 'trust.verify_time' '2031-01-01T25:00:00Z'"),
                "stderr: \(badRule.stderrText)")
        #expect(badRule.stdoutLines.isEmpty)

        let badFlag = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--verify-time", "2031-01-01"],
                                     directory: directory.path)
        defer { badFlag.kill() }
        let status = await badFlag.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0, "stderr: \(badFlag.stderrText)")
        #expect(badFlag.stderrText.contains("--verify-time: '2031-01-01' is not a UTC instant"),
                "stderr: \(badFlag.stderrText)")
        #expect(badFlag.stdoutLines.isEmpty)
    }

    @Test("run --verify-time two months ahead: a leaf expiring next month is rejected, the log line naming its notAfter")
    func runWithVerifyTime() async throws {
        let ca = TestCA.shared
        let now = Date()
        let leaf = try ca.leaf(notAfter: now + 30 * 86_400)
        let notAfter = TrustVerifyTimeTests.rfc3339(leaf.certificate.notValidAfter)
        let later = TrustVerifyTimeTests.rfc3339(now + 60 * 86_400)
        try await withOrigin(tls: ca.identity([leaf, ca.intermediate])) { origin in
            let directory = try TemporaryDirectory()
            let root = try directory.writePEM([ca.root], to: "R.pem")
            try directory.write("""
                rules:
                  - name: clock
                    match: { host: t.test }
                    map_remote: { to: "https://localhost:\(origin.port)" }
                    trust: { ca_file: "\(root)" }

                """, to: "rules/clock.yaml")
            let cli = try CLIProcess(Self.binary, ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules",
                                                   "--verify-time", later], directory: directory.path)
            defer { cli.kill() }
            let first = try #require(await cli.waitForLine { _ in true }, "stderr: \(cli.stderrText)")
            let proxy = String(first.dropFirst("hookproxy listening on ".count))
            let result = try await CurlCLI.run(["-s", "-S", "-x", proxy, "http://t.test/head-test"])
            #expect(result.stdout.starts(with: Array("hookproxy: trust rejected localhost: step 1: chain: certificate has expired".utf8)),
                    "\(String(decoding: result.stdout, as: UTF8.self))")
            let line = await cli.waitForLine { $0.contains("t.test/head-test") }
            #expect(line?.contains("502") == true, "\(line ?? "no exchange line")")
            #expect(line?.contains("notAfter \(notAfter), checked at \(later) (--verify-time)") == true,
                    "\(line ?? "no exchange line")")
            #expect(origin.requests.isEmpty)
            cli.signal(SIGTERM)
            #expect(await cli.waitForExit(timeout: .seconds(10)) == 0)
        }
    }
}
