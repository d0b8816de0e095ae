import Foundation
import ProxyTestSupport
import ProxyModel
import Testing
@testable import ProxyLog

/// A HAR writer process killed with SIGKILL while it writes leaves a valid HAR: the child is this test binary
/// running `childWritesUntilKilled`, which records exchanges through `HARWriter` as fast as it can.
@Suite(.serialized) struct HARKillTests {
    static let childVariable = "HOOKPROXY_TEST_HAR_CHILD"

    /// Only runs in the child process the kill test starts.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func childWritesUntilKilled() throws {
        let path = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
        let writer = try HARWriter(path: path, creatorVersion: "kill-test")
        var id = 0
        while true {
            for var flow in Samples.all {
                id += 1
                flow.id = id
                writer.record(flow)
            }
            writer.flush()
        }
    }

    @Test func fileIsValidAfterSIGKILLMidStream() async throws {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = TestFiles.directory().appendingPathComponent("killed.har").path
        var previous = 0
        for round in 0..<4 {
            let child = ChildProcess()
            child.executableURL = URL(fileURLWithPath: executable)
            child.arguments = ["--testing-library", "swift-testing", "--filter", "childWritesUntilKilled"]
            var environment = ProcessInfo.processInfo.environment
            environment[Self.childVariable] = path
            child.environment = environment
            child.standardOutput = FileHandle.nullDevice
            child.standardError = FileHandle.nullDevice
            try child.run()
            // let it write a while (a different amount each round), then kill it without warning
            // (measured from this round's starting size: a late wake-up must not make a later round's goal met already)
            func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
            let deadline = Date().addingTimeInterval(20)
            let target = size() + (200 + round * 150) * 900
            while Date() < deadline, size() < target {
                try await Task.sleep(for: .milliseconds(10))  // never Thread.sleep: it holds a pool thread
            }
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal)

            // The bytes on disk, as the killed process left them: valid JSON — unless the kill landed inside the one
            // `pwrite` of an entry spanning pages (the kernel stops a write at a page boundary for SIGKILL; nothing
            // in place can make that atomic). Then only that last line may be torn, and reopening repairs it.
            if (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))) == nil {
                let before = try Data(contentsOf: URL(fileURLWithPath: path))
                let lastLine = before.dropLast(before.last == 0x0A ? 1 : 0).lastIndex(of: 0x0A).map { before.count - $0 - 1 }
                let warnings = Warnings()
                let file = try LogFile(path: path, append: false)
                _ = try HARFile(file: file, creatorVersion: "kill-test", warn: warnings.add)
                file.close()
                #expect(warnings.all.count == 1 && warnings.all[0].contains("ended inside an entry"),
                        "round \(round): \(warnings.all)")
                let after = try Data(contentsOf: URL(fileURLWithPath: path))
                #expect(before.count - after.count <= (lastLine ?? 0), "round \(round): more than the last line dropped")
            }
            let entries = try TestFiles.entries(path)
            #expect(entries.count > previous, "round \(round): \(entries.count) entries")
            #expect(entries.allSatisfy { ($0["_hookproxy"] as? [String: Any])?["id"] is Int })
            previous = entries.count
        }
    }
}

