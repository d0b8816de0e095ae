import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn`: the part of Foundation's `Process` the tests use, with the same
/// names, so a test reads as it did.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3) finds the highest open descriptor by reading `/proc/self/fd`
/// and copies 256 bytes out of each short directory entry; when the last entry sits by the end of glibc's buffer
/// the copy reads an unmapped page and the whole test process dies of SIGSEGV (swift-corelibs-foundation#5472;
/// here 2 of 4 runs of the upstream and WebSocket suites, each then spending 8 minutes printing its backtrace).
/// This type closes the child's inherited descriptors with `closefrom` in the child instead.
public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String]?
    /// Nil: the test process's own environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// Each: nil (inherited), a `Pipe` (the child gets its far end; the parent closes that end once the child
    /// runs, as Foundation does) or a `FileHandle`.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    private struct State {
        var pid: pid_t = 0
        /// The `waitpid` status, once the child has ended.
        var status: Int32?
    }
    private let state = Mutex(State())
    private let ended = NSCondition()

    public init() {}

    public var processIdentifier: Int32 { state.withLock { $0.pid } }
    public var isRunning: Bool { state.withLock { $0.pid != 0 && $0.status == nil } }

    /// The exit code, or the signal that ended the child (see `terminationReason`).
    public var terminationStatus: Int32 {
        guard let status = state.withLock({ $0.status }) else { return 0 }
        return Self.signalled(status) ? status & 0x7f : (status >> 8) & 0xff
    }

    public var terminationReason: Process.TerminationReason {
        guard let status = state.withLock({ $0.status }) else { return .exit }
        return Self.signalled(status) ? .uncaughtSignal : .exit
    }

    public func run() throws {
        guard let executable = executableURL?.path else { throw TestSupportError("ChildProcess: no executableURL") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // The parent's ignored signals (NIO ignores SIGPIPE) and blocked ones are not the child's.
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let streams: [(Any?, Int32)] = [(standardInput, 0), (standardOutput, 1), (standardError, 2)]
        for (stream, target) in streams {
            guard let source = Self.childDescriptor(stream, target: target) else { continue }
            posix_spawn_file_actions_adddup2(&actions, source, target)
        }
        guard let closeFrom = Self.closeFrom, let changeDirectory = Self.changeDirectory else {
            throw TestSupportError("ChildProcess: this glibc has no posix_spawn_file_actions_addclosefrom_np (2.34+)")
        }
        _ = closeFrom(&actions, 3)
        if let directory = currentDirectoryURL?.path { _ = changeDirectory(&actions, directory) }

        let argv = ([executable] + (arguments ?? [])).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } }
        defer { envp?.forEach { free($0) } }

        var pid: pid_t = 0
        let result = (argv + [nil]).withUnsafeBufferPointer { argvPointer in
            if let envp {
                return (envp + [nil]).withUnsafeBufferPointer { envpPointer in
                    posix_spawn(&pid, executable, &actions, &attributes,
                                UnsafeMutablePointer(mutating: argvPointer.baseAddress!),
                                UnsafeMutablePointer(mutating: envpPointer.baseAddress!))
                }
            }
            return posix_spawn(&pid, executable, &actions, &attributes,
                               UnsafeMutablePointer(mutating: argvPointer.baseAddress!), environ)
        }
        guard result == 0 else {
            throw TestSupportError("ChildProcess: cannot start \(executable): \(String(cString: strerror(result)))")
        }
        let child = pid
        state.withLock { $0.pid = child }
        for (stream, target) in streams { Self.closeParentEnd(stream, target: target) }
        Thread.detachNewThread { [self] in reap(child) }
    }

    public func waitUntilExit() {
        ended.lock()
        while isRunning { ended.wait() }
        ended.unlock()
    }

    /// SIGTERM, as Foundation's `terminate()` sends.
    public func terminate() { signal(SIGTERM) }

    /// SIGINT.
    public func interrupt() { signal(SIGINT) }

    private func signal(_ number: Int32) {
        let pid = state.withLock { $0.status == nil ? $0.pid : 0 }
        if pid > 0 { kill(pid, number) }
    }

    private func reap(_ pid: pid_t) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        ended.lock()
        state.withLock { $0.status = status }
        ended.broadcast()
        ended.unlock()
    }

    // glibc's (2.34+, 2.29+), which Swift's Glibc module does not declare.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>,
                                                        UnsafePointer<CChar>) -> Int32
    nonisolated(unsafe) private static let closeFrom: CloseFrom? =
        dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: CloseFrom.self) }
    nonisolated(unsafe) private static let changeDirectory: ChangeDirectory? =
        dlsym(nil, "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: ChangeDirectory.self) }

    private static func signalled(_ status: Int32) -> Bool {
        let signal = status & 0x7f
        return signal != 0 && signal != 0x7f
    }

    private static func childDescriptor(_ stream: Any?, target: Int32) -> Int32? {
        switch stream {
        case let pipe as Pipe:
            return target == 0 ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle:
            return handle.fileDescriptor
        default:
            return nil
        }
    }

    private static func closeParentEnd(_ stream: Any?, target: Int32) {
        guard let pipe = stream as? Pipe else { return }
        try? (target == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close()
    }
}
