import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 3, hot reload through real sockets: the rules' directory is watched (`RuleStore.startWatching`, as the CLI
/// does) while hookproxy serves curl. Waits for new behaviour are bounded polls of at most 5 s.
@Suite("hot reload", .timeLimit(.minutes(2)))
struct HotReloadTests {
    /// A watched rule store over `directory/rules`, every reload result kept; the watcher is stopped afterwards.
    final class Watched: Sendable {
        let store: RuleStore
        let results = LockedBox<[Result<RuleSet, RuleLoadFailure>]>([])

        init(_ directory: TemporaryDirectory) throws {
            store = try RuleStore(paths: [directory.path + "/rules"], environment: [:])
            let results = self.results
            store.startWatching { result in results.mutate { $0.append(result) } }
        }

        var failures: [RuleLoadFailure] {
            results.value.compactMap { if case .failure(let failure) = $0 { failure } else { nil } }
        }
        var successes: Int {
            results.value.filter { if case .success = $0 { true } else { false } }.count
        }
    }

    func with(_ files: [String: String], _ body: (TemporaryDirectory, Watched, ProxyHarness) async throws -> Void)
        async throws {
        let directory = try TemporaryDirectory()
        for (name, yaml) in files { try directory.write(yaml, to: "rules/\(name)") }
        let watched = try Watched(directory)
        defer { watched.store.stopWatching() }
        try await withHookProxy(rules: watched.store) { proxy in try await body(directory, watched, proxy) }
    }

    static func respondRule(_ name: String, port: Int, path: String = "/r", body: String) -> String {
        """
        rules:
          - name: \(name)
            match: { port: \(port), path: "\(path)" }
            respond: { body: "\(body)" }

        """
    }

    /// Polls (at most 5 s) until a GET of `url` answers `expected`; returns the last body seen.
    static func pollBody(_ proxy: ProxyHarness, _ url: String, until expected: String) async throws -> String {
        let last = LockedBox("")
        _ = try await eventually(timeout: .seconds(5), interval: .milliseconds(100)) {
            last.value = try await Hooks.curl(proxy, url).bodyText
            return last.value == expected
        }
        return last.value
    }

    @Test("a good edit applies within 5 s")
    func goodEditApplies() async throws {
        try await withOrigin { origin in
            try await with(["rules.yaml": Self.respondRule("swap", port: origin.port, body: "version one")]) { directory, watched, proxy in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/r").bodyText == "version one")
                try directory.write(Self.respondRule("swap2", port: origin.port, body: "version two, longer"), to: "rules/rules.yaml")
                let seen = try await Self.pollBody(proxy, "\(origin.baseURL)/r", until: "version two, longer")
                #expect(seen == "version two, longer")
                #expect(watched.successes >= 1)
                // The record is written once the exchange ends, possibly just after curl returned.
                #expect(await eventually { proxy.recorder.records.contains { $0.rules == ["swap2"] } })
            }
        }
    }

    @Test("a broken edit keeps the old rules and reports file:line:col; the next good edit applies")
    func brokenEditKeepsOldRules() async throws {
        try await withOrigin { origin in
            try await with(["rules.yaml": Self.respondRule("keep", port: origin.port, body: "old rules")]) { directory, watched, proxy in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/r").bodyText == "old rules")
                let broken = """
                    rules:
                      - name: keep
                        match: { port: \(origin.port), path: "/r" }
                        respondd: { body: "broken" }

                    """
                try directory.write(broken, to: "rules/rules.yaml")
                let reported = await eventually(timeout: .seconds(5), interval: .milliseconds(20)) { !watched.failures.isEmpty }
                #expect(reported, "no reload failure reported")
                let text = watched.failures.first?.description ?? ""
                #expect(text.contains("rules.yaml:4:5:"), "\(text)")
                #expect(text.contains("respond"), "the nearest key is suggested: \(text)")
                // The old rules are still in force.
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/r").bodyText == "old rules")
                #expect(origin.requests.isEmpty)

                try directory.write(Self.respondRule("fixed", port: origin.port, body: "fixed rules"), to: "rules/rules.yaml")
                #expect(try await Self.pollBody(proxy, "\(origin.baseURL)/r", until: "fixed rules") == "fixed rules")
            }
        }
    }

    @Test("an exchange in flight finishes under the rules it started with")
    func inFlightKeepsItsRules() async throws {
        try await withOrigin { origin in
            func rules(_ version: String) -> String {
                """
                rules:
                  - name: edit-\(version)
                    match: { port: \(origin.port), path: "/held" }
                    response:
                      set_headers: { X-Rules: "\(version)" }
                      body: { replace: [{ text: "slow", with: "\(version)" }] }

                """
            }
            try await with(["rules.yaml": rules("v1")]) { directory, watched, proxy in
                // The first request is held by the origin until the edit applied and a second request saw it.
                async let inFlight = Hooks.curl(proxy, "\(origin.baseURL)/held?key=in-flight")
                // The origin has the request (the plan was made) before the edit.
                let arrived = await eventually(timeout: .seconds(5), interval: .milliseconds(10)) { !origin.requests.isEmpty }
                #expect(arrived)
                try directory.write(rules("v2-longer"), to: "rules/rules.yaml")
                let reloaded = await eventually(timeout: .seconds(5), interval: .milliseconds(10)) { watched.successes >= 1 }
                #expect(reloaded, "the edit was not picked up")
                origin.release("fresh")
                let fresh = try await Hooks.curl(proxy, "\(origin.baseURL)/held?key=fresh")
                #expect(fresh.header("X-Rules") == "v2-longer")
                #expect(fresh.bodyText == "v2-longer head\n")
                origin.release("in-flight")

                let old = try await inFlight
                #expect(old.status == 200)
                #expect(old.header("X-Rules") == "v1")
                #expect(old.bodyText == "v1 head\n")
            }
        }
    }

    @Test("a deleted file removes its rules; the other files' rules stay")
    func deletedFileRemovesRules() async throws {
        try await withOrigin { origin in
            let files = [
                "10-a.yaml": Self.respondRule("from-a", port: origin.port, path: "/a", body: "A"),
                "20-b.yaml": Self.respondRule("from-b", port: origin.port, path: "/status/201", body: "B"),
            ]
            try await with(files) { directory, watched, proxy in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/status/201").bodyText == "B")
                try FileManager.default.removeItem(atPath: directory.path + "/rules/20-b.yaml")
                let seen = try await Self.pollBody(proxy, "\(origin.baseURL)/status/201", until: "status 201\n")
                #expect(seen == "status 201\n")
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/a").bodyText == "A")
                #expect(watched.store.current.ruleNames == ["from-a"])
            }
        }
    }

    @Test("editing a mock file (body_file) reloads it")
    func mockFileEditReloads() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            try directory.write("first mock\n", to: "rules/mocks/m.txt")
            try directory.write("""
                rules:
                  - name: mock
                    match: { port: \(origin.port) }
                    respond: { body_file: mocks/m.txt }
                """, to: "rules/rules.yaml")
            let watched = try Watched(directory)
            defer { watched.store.stopWatching() }
            try await withHookProxy(rules: watched.store) { proxy in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/m").bodyText == "first mock\n")
                try directory.write("second mock, edited\n", to: "rules/mocks/m.txt")
                #expect(try await Self.pollBody(proxy, "\(origin.baseURL)/m", until: "second mock, edited\n")
                        == "second mock, edited\n")
            }
        }
    }
    @Test("a file added to the rules directory applies; editor backups and swap files beside it are ignored")
    func addedFileApplies() async throws {
        try await withOrigin { origin in
            try await with(["10-a.yaml": Self.respondRule("from-a", port: origin.port, path: "/a", body: "A")]) { directory, watched, proxy in
                try directory.write("rules: [broken", to: "rules/20-b.yaml~")
                try directory.write("rules: [broken", to: "rules/.20-b.yaml.swp")
                try directory.write(Self.respondRule("from-b", port: origin.port, path: "/b", body: "B"), to: "rules/20-b.yaml")
                #expect(try await Self.pollBody(proxy, "\(origin.baseURL)/b", until: "B") == "B")
                #expect(watched.failures.isEmpty, "\(watched.failures)")
                #expect(watched.store.current.ruleNames == ["from-a", "from-b"])
            }
        }
    }

    /// `hookproxy run --rules . > proxy.log` in the rules directory: every reload logged a line, the log's growth
    /// was a change in the directory, and the proxy reloaded ten times a second for as long as it ran.
    @Test("a log file growing in the rules directory does not reload the rules; a rule file added beside it does")
    func otherFilesInTheDirectoryAreNotWatched() async throws {
        try await withOrigin { origin in
            try await with(["10-a.yaml": Self.respondRule("from-a", port: origin.port, path: "/a", body: "A")]) { directory, watched, proxy in
                let log = directory.path + "/rules/proxy.log"
                for line in 0..<20 {
                    try directory.write(String(repeating: "a log line\n", count: line + 1), to: "rules/proxy.log")
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(FileManager.default.fileExists(atPath: log))
                // Five watch rounds (250 ms each) with nothing but the log changing.
                try await Task.sleep(for: .milliseconds(1250))
                #expect(watched.results.value.isEmpty, "\(watched.results.value.count) reloads for a log file")
                try directory.write(Self.respondRule("from-b", port: origin.port, path: "/b", body: "B"), to: "rules/20-b.yaml")
                #expect(try await Self.pollBody(proxy, "\(origin.baseURL)/b", until: "B") == "B")
            }
        }
    }

    @Test("--rules naming a file: edits saved by rename (as editors do) apply, again and again")
    func atomicSaveOfAWatchedFile() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let file = try directory.write(Self.respondRule("v", port: origin.port, body: "save 0"), to: "conf/only.yaml")
            let store = try RuleStore(paths: [file], environment: [:])
            store.startWatching { _ in }
            defer { store.stopWatching() }
            try await withHookProxy(rules: store) { proxy in
                #expect(try await Hooks.curl(proxy, "\(origin.baseURL)/r").bodyText == "save 0")
                for round in 1...3 {
                    let temporary = try directory.write(Self.respondRule("v", port: origin.port, body: "save \(round)"),
                                                        to: "conf/.only.yaml.tmp")
                    #expect(rename(temporary, file) == 0)
                    #expect(try await Self.pollBody(proxy, "\(origin.baseURL)/r", until: "save \(round)") == "save \(round)",
                            "round \(round)")
                }
            }
        }
    }

    /// `hookproxy run --rules r` in the directory of `r`: the loader and the watcher take `r`'s directory, which
    /// Foundation's `deletingLastPathComponent` could not name for a one-character relative path (the binary died of
    /// SIGILL). The loader and the watcher use `PathText` now.
    @Test("--rules naming a one-character file in the working directory: the binary starts and reloads it")
    func oneCharacterRelativeFile() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            _ = try directory.write(Self.respondRule("v", port: origin.port, body: "first"), to: "r")
            try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--rules", "r"], directory: directory) { proxy in
                #expect(try await proxy.curl("\(origin.baseURL)/r").bodyText == "first")
                _ = try directory.write(Self.respondRule("v", port: origin.port, body: "second"), to: "r")
                let seen = LockedBox("")
                _ = try await eventually(timeout: .seconds(5), interval: .milliseconds(100)) {
                    seen.value = try await proxy.curl("\(origin.baseURL)/r").bodyText
                    return seen.value == "second"
                }
                #expect(seen.value == "second")
            }
        }
    }
}
