import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

/// A log file that stops growing in the middle of a batch, as on a full disk (write(2) takes part of the batch, then
/// fails), keeps whole records only: the part of the failed batch that got in is cut off again, the user is told on
/// stderr, and the next batch that fits is appended cleanly.
///
/// The child (this test binary running `childWritesPastTheFileSizeLimit`) lowers its own RLIMIT_FSIZE, so the kernel
/// writes up to the limit and fails the rest with EFBIG as a full filesystem does with ENOSPC; in a child process
/// the limit touches no other test, and no root or tmpfs is needed.
@Suite struct LogFileFullTests {
    static let childVariable = "HOOKPROXY_TEST_FULL_CHILD"

    /// Only runs in the child process `partialWriteIsCutOff` starts.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func childWritesPastTheFileSizeLimit() throws {
        let directory = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
        signal(SIGXFSZ, SIG_IGN)  // past the limit write(2) fails with EFBIG instead of the signal killing us
        var limits = rlimit()
        try #require(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits) == 0)
        let jsonl = JSONLSink(file: try LogFile(path: directory + "/t.jsonl", append: true))
        let har = try HARFile(file: try LogFile(path: directory + "/t.har", append: false), creatorVersion: "1")
        for sink in [jsonl, har] as [BatchingFileSink] {
            for flow in Samples.all { sink.write(flow) }
            sink.endBatch()
            // Room for part of the next batch's first record only, for two batches.
            var full = limits
            full.rlim_cur = rlim_t(sink.file.size + 300)
            try #require(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &full) == 0)
            for _ in 0..<2 {
                for flow in Samples.all { sink.write(flow) }
                sink.endBatch()
            }
            // Room again.
            try #require(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits) == 0)
            for flow in Samples.all { sink.write(flow) }
            sink.close()
        }
    }

    @Test func partialWriteIsCutOff() throws {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let directory = TestFiles.directory().path
        var environment = ProcessInfo.processInfo.environment
        environment[Self.childVariable] = directory
        let (status, stdout, stderr) = try TestFiles.run(
            executable, ["--testing-library", "swift-testing", "--filter", "childWritesPastTheFileSizeLimit"],
            environment: environment)
        #expect(status == 0, "\(stdout)\n\(stderr)")

        // JSONL: every line a whole record, the two failed batches gone, nothing glued to the batch after them.
        let jsonl = directory + "/t.jsonl"
        let text = try String(contentsOfFile: jsonl, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        let ids = lines.map { line in
            ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any])?["id"] as? Int
        }
        #expect(ids == Samples.all.map(\.id) + Samples.all.map(\.id), "\(lines.map { $0.prefix(60) })")
        let told = stderr.components(separatedBy: "hookproxy: cannot write \(jsonl): File too large").count - 1
        #expect(told == 1, "stderr: \(stderr)")

        // HAR: valid, with the entries of the same two batches.
        let entries = try TestFiles.entries(directory + "/t.har")
        #expect(entries.count == 2 * Samples.all.count)
        #expect(stderr.contains("hookproxy: cannot write \(directory)/t.har: File too large; the entries of that batch are dropped"),
                "stderr: \(stderr)")
        #expect(!stderr.contains("hookproxy: hookproxy:") && !stderr.contains("failed: hookproxy"), "one prefix: \(stderr)")
    }
}
