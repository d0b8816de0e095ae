import Foundation
import ProxyTestSupport
import Testing

/// Out of file descriptors, accept(2) fails at once with EMFILE for every client waiting in the listen backlog, and
/// the listening socket stays readable: the listener must back off, not retry on every loop turn (a spinning core).
/// The built binary runs as a child with a limit of its own, so exhausting its descriptors touches no other test.
@Suite("accept backoff: out of file descriptors", .timeLimit(.minutes(3)))
struct AcceptBackoffTests {
    static let limit = 200
    /// Descriptors below this that bash opens and hookproxy inherits: taken by "everything else" before clients come.
    /// (Only free numbers: the child inherits no other descriptor from the test process, see `ChildProcess`.)
    static let taken = 150

    static func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// The CPU time (user + system) the process has used, in seconds, from /proc/PID/stat.
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // (after the command name, which may hold spaces: state is field 3, utime 14, stime 15)
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        let ticks = try #require(Double(fields[11])) + (try #require(Double(fields[12])))
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("clients knocking while every descriptor is taken: the listener backs off (far below a core), and accepts again once descriptors are free")
    func outOfDescriptorsDoesNotSpin() async throws {
        let executable = try #require(HookproxyProcess.executable, "build hookproxy first (swift build)")
        try #require(FileManager.default.isExecutableFile(atPath: "/bin/bash"))
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            _ = try directory.write("rules: []\n", to: "rules/r.yaml")
            let arguments = ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules", "--quiet"]
            let child = try HookproxyProcess(arguments: arguments, directory: directory)
            child.process.executableURL = URL(fileURLWithPath: "/bin/bash")
            child.process.arguments = ["-c", """
                for ((fd = 3; fd < \(Self.taken); fd++)); do [ -e /proc/$$/fd/$fd ] || eval "exec $fd</dev/null"; done
                ulimit -n \(Self.limit) && exec "$0" "$@"
                """, executable] + arguments
            let started = try await child.start()
            defer { child.killNow() }
            try #require(started, "\(child.stderr)")
            let pid = child.process.processIdentifier
            let port = try #require(Int(child.proxyURL.split(separator: ":").last ?? ""))

            // Idle clients take the free descriptors (fewer than --max-connections, lowered to fit the limit: none is
            // turned away with a 503), and more wait in the listen backlog.
            let free = Self.limit - Self.openDescriptors(pid)
            try #require(free > 0 && free < 50, "\(free) descriptors free: \(child.stderr)")
            var clients: [RawClient] = []
            defer { for client in clients { client.close() } }
            for _ in 0..<(free + 20) { clients.append(try await RawClient.connect(port: port)) }
            let exhausted = await eventually(timeout: .seconds(20)) { Self.openDescriptors(pid) >= Self.limit }
            try #require(exhausted, "\(Self.openDescriptors(pid)) descriptors open")

            let cpuBefore = try Self.cpuSeconds(pid)
            let clock = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))
            let elapsed = ContinuousClock.now - clock
            let share = (try Self.cpuSeconds(pid) - cpuBefore) / (Double(elapsed.components.seconds)
                + Double(elapsed.components.attoseconds) / 1e18)
            #expect(share < 0.1, "hookproxy used \(Int(share * 100))% of a core while out of descriptors")

            for client in clients { client.close() }
            clients = []
            let served = await eventually(timeout: .seconds(15)) {
                (try? await child.curl("\(origin.baseURL)/bytes/10"))?.status == 200
            }
            #expect(served, "not served once descriptors were free: \(child.stderr)")
            #expect(child.process.isRunning)
        }
    }
}
