import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

/// Every file in the repository's `rules/` folder loads, as `make test` (`hookproxy check --rules rules`) needs.
@Suite struct ExampleRulesTests {
    static let rulesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("rules").path

    @Test func everyExampleLoads() throws {
        // An empty environment: the examples must not depend on any variable being set.
        let set: RuleSet
        do throws(RuleLoadFailure) {
            set = try RuleLoader.load(paths: [Self.rulesDirectory], environment: [:])
        } catch {
            Issue.record("rules/ failed to load:\n\(error)")
            return
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.rulesDirectory).filter { $0.hasSuffix(".yaml") }
        #expect(set.fileCount == files.count)
        #expect(set.ruleCount >= 20)
        // One example of each concern fires as its comments say.
        let mock = set.plan(for: request("GET", "https://api.example.test/v1/users/42?mock=1"))
        #expect(mock.localResponse?.head.headers["Content-Type"] == "application/json")
        #expect(mock.events.map(\.logText).contains("responded from mocks/user.json"))
        let mapped = set.plan(for: request("GET", "https://staging.api.example.test/v1/users?page=2"))
        #expect(mapped.upstreamURL.description == "http://127.0.0.1:9000/v1/users?page=2")
        #expect(set.intercept(host: "api.example.test", port: 443) == true)
        #expect(set.intercept(host: "www.bank.example.test", port: 443) == false)
        let clock = set.plan(for: request("GET", "https://future.example.test/"))
        #expect(clock.trust?.verifyTime?.description == "2031-01-01T00:00:00Z")
        // Each file loads on its own too.
        for file in files {
            do throws(RuleLoadFailure) {
                _ = try RuleLoader.load(paths: [Self.rulesDirectory + "/" + file], environment: [:])
            } catch {
                Issue.record("\(file): \(error)")
            }
        }
    }

    @Test func checkSaysOK() {
        let report = RuleLoader.check(paths: [Self.rulesDirectory], environment: [:])
        #expect(report.exitCode == 0, "\(report.standardError)")
        #expect(report.standardOutput.hasPrefix("ok: "))
    }
}
