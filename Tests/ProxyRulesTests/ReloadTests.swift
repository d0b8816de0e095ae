import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

/// Collects reload results from the watcher thread.
final class ReloadLog: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<RuleSet, RuleLoadFailure>] = []
    func append(_ result: Result<RuleSet, RuleLoadFailure>) { lock.lock(); results.append(result); lock.unlock() }
    var all: [Result<RuleSet, RuleLoadFailure>] { lock.lock(); defer { lock.unlock() }; return results }
}

func waitUntil(seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}

@Suite(.serialized) struct ReloadTests {
    @Test func editBreakFixDelete() async throws {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: one\n")
        dir.write("b.yaml", "rules:\n  - name: other\n")
        let store = try RuleStore(paths: [dir.path], environment: [:])
        let log = ReloadLog()
        store.startWatching { log.append($0) }
        defer { store.stopWatching() }
        #expect(store.current.ruleNames == ["one", "other"])
        let inFlight = store.current  // a flow keeps its snapshot

        // A good edit applies within 5 s.
        dir.write("a.yaml", "rules:\n  - name: one\n  - name: two\n")
        #expect(await waitUntil { store.current.ruleNames == ["one", "two", "other"] })
        #expect(inFlight.ruleNames == ["one", "other"])

        // A broken edit keeps the old rules and reports every error.
        let before = log.all.count
        dir.write("a.yaml", "rules:\n  - name: one\n    mach: {}\n  - nme: x\n")
        #expect(await waitUntil { log.all.count > before })
        guard case .failure(let failure)? = log.all.last else {
            Issue.record("expected a failed reload")
            return
        }
        #expect(failure.errors.map(\.message) == ["unknown key 'mach' in 'rule' — did you mean 'match'?",
                                                  "unknown key 'nme' in 'rule' — did you mean 'name'?",
                                                  "rule has no 'name' (every rule needs a unique name)"])
        #expect(store.current.ruleNames == ["one", "two", "other"])

        // The next good edit applies.
        dir.write("a.yaml", "rules:\n  - name: three\n")
        #expect(await waitUntil { store.current.ruleNames == ["three", "other"] })

        // A deleted file removes its rules.
        dir.delete("a.yaml")
        #expect(await waitUntil { store.current.ruleNames == ["other"] })
        #expect(store.current.fileCount == 1)
    }

    @Test func mockEditReloads() async throws {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("mocks/m.txt", "v1")
        dir.write("r.yaml", "rules:\n  - name: m\n    respond: {body_file: mocks/m.txt}\n")
        let store = try RuleStore(paths: [dir.path + "/r.yaml"], environment: [:])
        store.startWatching { _ in }
        defer { store.stopWatching() }
        func body() -> String {
            String(decoding: store.current.plan(for: request("GET", "http://x.test/")).localResponse?.body ?? [], as: UTF8.self)
        }
        #expect(body() == "v1")
        dir.write("mocks/m.txt", "v2")
        #expect(await waitUntil { body() == "v2" })
    }

    @Test func explicitFileDeletedOnReloadRemovesItsRules() throws {
        let dir = TempRules()
        defer { dir.remove() }
        let a = dir.write("a.yaml", "rules:\n  - name: a\n")
        let b = dir.write("b.yaml", "rules:\n  - name: b\n")
        let store = try RuleStore(paths: [a, b], environment: [:])
        #expect(store.current.ruleNames == ["a", "b"])
        dir.delete("a.yaml")
        let result = store.reload()
        #expect((try? result.get())?.ruleNames == ["b"])
        #expect((try? result.get())?.warnings.map(\.message) == ["rule file no longer exists: it contributes no rules"])
        #expect(store.current.ruleNames == ["b"])
    }

    /// A `--rules` directory moved away (a checkout, a rename) used to reload as no rules at all, silently; it is an
    /// error now, and the rules in force stay until it is back.
    @Test func directoryGoneOnReloadKeepsTheRules() throws {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: a\n")
        let store = try RuleStore(paths: [dir.path], environment: [:])
        let moved = dir.path + "-moved"
        try FileManager.default.moveItem(atPath: dir.path, toPath: moved)
        guard case .failure(let failure) = store.reload() else {
            Issue.record("a vanished rules directory reloaded as a success")
            try? FileManager.default.moveItem(atPath: moved, toPath: dir.path)
            return
        }
        #expect(failure.description.contains("\(dir.path):1:1: --rules directory no longer exists"), "\(failure)")
        #expect(store.current.ruleNames == ["a"])
        try FileManager.default.moveItem(atPath: moved, toPath: dir.path)
        #expect((try? store.reload().get())?.ruleNames == ["a"])
    }

    /// A `*.yaml` name that is a directory, or a symbolic link to nothing, was skipped without a word.
    @Test func oddRuleFileNamesAreReported() throws {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: a\n")
        try FileManager.default.createDirectory(atPath: dir.path + "/b.yaml", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: dir.path + "/c.yaml", withDestinationPath: dir.path + "/missing.yaml")
        let set = try RuleLoader.load(paths: [dir.path], environment: [:])
        #expect(set.ruleNames == ["a"])
        #expect(set.warnings.map(\.description) == [
            "\(dir.path)/b.yaml:1:1: warning: a directory, not a rule file: ignored",
            "\(dir.path)/c.yaml:1:1: warning: a symbolic link to nothing, not a rule file: ignored",
        ])
    }

    @Test func startFailsWithAllErrors() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("r.yaml", "rules:\n  - name: a\n    mach: 1\n  - name: a\n")
        #expect(throws: RuleLoadFailure.self) { try RuleStore(paths: [dir.path], environment: [:]) }
    }
}
