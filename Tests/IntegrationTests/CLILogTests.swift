import Foundation
import ProxyTestSupport
import Testing

/// Issue 3 through the built `hookproxy` binary: rule errors at start, hot reload as the CLI wires it, and the
/// console line naming the rules that fired and what they did.
@Suite("hookproxy run: rules and console", .serialized, .timeLimit(.minutes(2)))
struct CLILogTests {
    @Test("a rule file that fails to load at start: exit 1 with every error as file:line:col, nothing listens")
    func startFailsOnRuleErrors() async throws {
        let directory = try TemporaryDirectory()
        try directory.write("""
            rules:
              - name: one
                match: { host: "a.example.test" }
                respondd: { body: "x" }
              - name: two
                match: { methd: GET }
                respond: { body_file: missing.json }
            """, to: "rules/bad.yaml")
        let child = try HookproxyProcess(
            arguments: ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules"], directory: directory)
        let started = try await child.start()
        let status = await child.waitForExit()
        #expect(!started)
        #expect(status == 1)
        #expect(!child.stdout.contains("listening"), "\(child.stdout)")
        let errors = child.stderr
        #expect(errors.contains("bad.yaml:4:5:"), "\(errors)")
        #expect(errors.contains("bad.yaml:6:14:"), "\(errors)")
        #expect(errors.contains("missing.json"), "\(errors)")
    }

    /// A review's find: the second writer's lock on the one file said "is being written by another hookproxy".
    @Test("--har and --jsonl naming one file: a usage error that says so, nothing listens")
    func sameFileForBothLogs() async throws {
        let directory = try TemporaryDirectory()
        let child = try HookproxyProcess(arguments: ["run", "--listen", "127.0.0.1:0", "--no-ui", "--har", "log.txt",
                                                     "--jsonl", "./log.txt"], directory: directory)
        let started = try await child.start()
        let status = await child.waitForExit()
        #expect(!started)
        #expect(status == 64, "\(child.stderr)")
        #expect(child.stderr.contains("--har and --jsonl name the same file"), "\(child.stderr)")
    }

    @Test("console line: the rules that fired and `mapped → …` / `responded from …`")
    func consoleLineNamesRulesAndActions() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            try directory.write(#"{"id": 1}"# + "\n", to: "rules/mocks/user.json")
            try directory.write("""
                rules:
                  - name: local-api
                    match: { port: \(origin.port), path: "/api/*" }
                    map_remote: { to: "http://127.0.0.1:\(origin.port)/echo" }
                  - name: no-cookies
                    match: { port: \(origin.port) }
                    request: { remove_headers: [Cookie] }
                  - name: mock-user
                    match: { port: \(origin.port), path: "/user" }
                    respond: { body_file: mocks/user.json }
                """, to: "rules/rules.yaml")
            try await HookproxyProcess.with(
                ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules"], directory: directory) { proxy in
                let mapped = try await proxy.curl("\(origin.baseURL)/api/u")
                #expect(mapped.status == 200)
                let mocked = try await proxy.curl("\(origin.baseURL)/user")
                #expect(mocked.bodyText == #"{"id": 1}"# + "\n")
                let printed = await eventually(timeout: .seconds(5)) {
                    proxy.stdout.split(separator: "\n").count >= 3
                }
                #expect(printed, "\(proxy.stdout)")
                let lines = proxy.stdout.split(separator: "\n").map(String.init)
                let mapLine = lines.first { $0.contains("/api/u") } ?? ""
                #expect(mapLine.contains("[local-api, no-cookies]"), "\(mapLine)")
                #expect(mapLine.contains("mapped → http://127.0.0.1:\(origin.port)/echo"), "\(mapLine)")
                #expect(mapLine.contains(" 200 "), "\(mapLine)")
                let mockLine = lines.first { $0.contains("/user") } ?? ""
                #expect(mockLine.contains("[no-cookies, mock-user]"), "\(mockLine)")
                #expect(mockLine.contains("responded from mocks/user.json"), "\(mockLine)")
            }
        }
    }

    @Test("hot reload in the binary: a broken edit is logged with file:line:col and the old rules stay; a good edit applies")
    func binaryHotReload() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            func rule(_ body: String, key: String = "respond") -> String {
                """
                rules:
                  - name: reloadable
                    match: { port: \(origin.port) }
                    \(key): { body: "\(body)" }

                """
            }
            try directory.write(rule("first"), to: "rules/rules.yaml")
            try await HookproxyProcess.with(
                ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules"], directory: directory) { proxy in
                #expect(try await proxy.curl("\(origin.baseURL)/x").bodyText == "first")
                try directory.write(rule("broken", key: "respnd"), to: "rules/rules.yaml")
                let logged = await eventually(timeout: .seconds(5), interval: .milliseconds(50)) {
                    proxy.stderr.contains("rules.yaml:4:5:")
                }
                #expect(logged, "stderr: \(proxy.stderr)")
                #expect(try await proxy.curl("\(origin.baseURL)/x").bodyText == "first")

                try directory.write(rule("second, good"), to: "rules/rules.yaml")
                let last = LockedBox("")
                _ = try await eventually(timeout: .seconds(5), interval: .milliseconds(100)) {
                    last.value = try await proxy.curl("\(origin.baseURL)/x").bodyText
                    return last.value == "second, good"
                }
                #expect(last.value == "second, good")
                #expect(origin.requests.isEmpty)
            }
        }
    }
}
