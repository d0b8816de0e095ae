import Foundation
import ProxyTestSupport

/// Whether this run can bind-mount over system files in a private mount namespace (root, and `unshare` that works
/// here): the tests that replace the system's trust store or resolver for the real binary run only then.
enum PrivateMounts {
    static func available(needing files: [String]) -> Bool {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
              files.allSatisfy(FileManager.default.fileExists(atPath:)) else { return false }
        let probe = ChildProcess()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["-m", "--propagation", "private", "true"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }
}
