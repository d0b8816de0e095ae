import Foundation
import Glibc
import ProxyTestSupport
import Testing

/// `ChildProcess`, the tests' `posix_spawn` replacement for Foundation's `Process` (whose `/proc/self/fd` scan
/// crashed the test process at random): what the tests rely on from it.
@Suite("ChildProcess (test support)", .timeLimit(.minutes(1)))
struct ChildProcessTests {
    private static func shell(_ script: String, environment: [String: String]? = nil,
                              directory: String? = nil) throws -> (ChildProcess, Pipe) {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", script]
        child.environment = environment
        child.currentDirectoryURL = directory.map { URL(fileURLWithPath: $0) }
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        return (child, output)
    }

    private static func text(_ pipe: Pipe) -> String {
        String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    @Test("output through a pipe, the exit code, the environment and the directory given")
    func outputStatusEnvironmentDirectory() throws {
        let (child, output) = try Self.shell("echo \"$GREETING\"; pwd; exit 3",
                                             environment: ["GREETING": "hi there", "PATH": "/usr/bin:/bin"],
                                             directory: "/tmp")
        #expect(Self.text(output) == "hi there\n/tmp\n")
        child.waitUntilExit()
        #expect(!child.isRunning)
        #expect(child.terminationReason == .exit)
        #expect(child.terminationStatus == 3)
    }

    @Test("terminate: the child ends by SIGTERM, which it does not ignore though the test process ignores SIGPIPE")
    func terminate() async throws {
        let (child, _) = try Self.shell("trap - TERM; sleep 30")
        #expect(child.isRunning && child.processIdentifier > 0)
        child.terminate()
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(child.terminationStatus == SIGTERM)
    }

    @Test("a descriptor the test process holds open (not close-on-exec) is not the child's")
    func inheritsNoDescriptor() throws {
        let held = open("/dev/null", O_RDONLY)  // no O_CLOEXEC
        #expect(held > 2)
        defer { close(held) }
        let (child, output) = try Self.shell("[ -e /proc/self/fd/\(held) ] && echo inherited || echo closed")
        #expect(Self.text(output) == "closed\n")
        child.waitUntilExit()
    }
}
