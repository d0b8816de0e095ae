import Foundation
import ProxyTestSupport
import Testing

/// An idle proxy keeps only the threads it uses (issue 14: idle RSS): its thread pools start at their first job.
/// (That the socket watcher thread does not start where the kernel offers AIO is `LoopSetAlarmTests`'.)
@Suite(.timeLimit(.minutes(2)))
struct IdleThreadsTests {
    /// The names of the process's threads (`/proc/PID/task/*/comm`).
    private static func threadNames(_ pid: Int32) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test func poolThreadsStartWithTheirFirstJob() async throws {
        let origin = try await TestOrigin.start()
        let directory = try TemporaryDirectory()
        try directory.write("""
            rules:
              - name: shout
                match: { path: "/echo" }
                response:
                  body:
                    replace: [{ text: "quiet", with: "LOUD" }]
            """, to: "rules/shout.yaml")
        try await HookproxyProcess.with(["run", "--listen", "127.0.0.1:0", "--no-ui", "--quiet",
                                         "--rules", directory.path + "/rules"], directory: directory) { child in
            let pid = child.process.processIdentifier
            let plain = try await child.curl("\(origin.baseURL)/bytes/100")
            #expect(plain.status == 200)
            let idle = Self.threadNames(pid)
            #expect(!idle.isEmpty)
            #expect(!idle.contains { $0.hasPrefix("TP-#") }, "\(idle)")
            // A body transform runs on the transform pool: its two threads start now, and only those.
            let transformed = try await child.curl("\(origin.baseURL)/echo", ["--data", "quiet please"])
            #expect(transformed.status == 200)
            #expect(transformed.bodyText.contains("LOUD please"), "\(transformed.bodyText)")
            let busy = Self.threadNames(pid)
            #expect(busy.filter { $0.hasPrefix("TP-#") }.count == 2, "\(busy)")
        }
        try await origin.shutdown()
    }
}
