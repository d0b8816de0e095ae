import Foundation
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyLog

@Suite struct HARWriterTests {
    @Test func fileIsValidJSONAfterEveryEntry() throws {
        let path = TestFiles.directory().appendingPathComponent("t.har").path
        let writer = try HARWriter(path: path, creatorVersion: "1.2.3")
        #expect(try TestFiles.entries(path).isEmpty) // valid from the moment it is opened
        for (index, flow) in Samples.all.enumerated() {
            writer.record(flow)
            writer.flush()
            let entries = try TestFiles.entries(path) // the bytes on disk, while the writer is still open
            #expect(entries.count == index + 1)
        }
        writer.close()
        let log = try #require(try TestFiles.json(path)["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        #expect((log["creator"] as? [String: String]) == ["name": "hookproxy", "version": "1.2.3"])
        #expect(log["pages"] == nil)
    }

    @Test func validatesAgainstHARSchemaAndReadsBackWithHaralyzer() throws {
        let directory = TestFiles.directory()
        let path = directory.appendingPathComponent("all.har").path
        let writer = try HARWriter(path: path, creatorVersion: "0.1.0")
        for flow in Samples.all { writer.record(flow) }
        writer.close()

        let schema = directory.appendingPathComponent("har-1.2.schema.json")
        try HARSchema.json.write(to: schema, atomically: true, encoding: .utf8)
        let script = directory.appendingPathComponent("check_har.py")
        try HARSchema.checker.write(to: script, atomically: true, encoding: .utf8)
        #expect(FileManager.default.isExecutableFile(atPath: TestFiles.python),
                "no \(TestFiles.python): run `make pydeps` (make test does)")
        let (status, out, err) = try TestFiles.run(TestFiles.python, [script.path, schema.path, path])
        #expect(status == 0, "schema or reader rejected the HAR: \(err)")
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]])

        let records = Samples.all
        #expect(seen.count == records.count)
        #expect(seen.map { $0["method"] as? String } == records.map(\.request.method))
        #expect(seen.map { $0["status"] as? Int } == records.map { $0.response?.status ?? 0 })
        #expect(seen[0]["url"] as? String == "http://api.example.com/v1/users?token=abc123&page=2")
        #expect((seen[0]["start"] as? String)?.hasPrefix("2023-11-14T22:13:20.123") == true)
        // one entry per hop, with the hop and upstream URL under _hookproxy
        let hops = seen[2...4].map { ($0["hookproxy"] as? [String: Any])?["hop"] as? Int }
        #expect(hops == [0, 1, 2])
        let last = try #require(seen[4]["hookproxy"] as? [String: Any])
        let events = try #require(last["events"] as? [[String: String]])
        #expect(events == [["hook": "redirect", "action": "redirect followed 2 hops", "detail": ""]])
        #expect(last["rules"] as? [String] == ["follow-redirects"])
        // binary body round-trips through base64 as the independent reader decodes it
        let binary = try #require(seen[6]["body_bytes"] as? [Int])
        #expect(binary.map { UInt8($0) } == Samples.binary)
        #expect(seen[6]["mime"] as? String == "image/png")
        // the failed exchanges carry their error
        #expect((seen[1]["hookproxy"] as? [String: Any])?["error"] as? String
                == "hookproxy: upstream refused down.example.invalid: Could not resolve host")
        #expect((seen[8]["hookproxy"] as? [String: Any])?["error"] as? String
                == "hookproxy: trust rejected pinned.example.com: no pin matched")
        // truncated body: marked, text holds the captured part
        let truncated = try #require((seen[7]["hookproxy"] as? [String: Any])?["truncated"] as? [String: Bool])
        #expect(truncated == ["request": true, "response": true])
        #expect((seen[7]["body_bytes"] as? [Int])?.count == 1024)
    }

    @Test func entryFields() throws {
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(HARWriter.entryJSON(for: Redactor().redact(Samples.plain)).utf8)) as? [String: Any])
        let timings = try #require(entry["timings"] as? [String: Double])
        // connect without TLS; wait = first byte - dns - connect; receive = total - first byte
        #expect(timings == ["blocked": -1, "dns": 1.5, "connect": 2.25, "send": 0, "wait": 6.25, "receive": 2.5, "ssl": -1])
        #expect(entry["time"] as? Double == 12.5)
        #expect(entry["serverIPAddress"] as? String == "127.0.0.1")
        #expect(entry["connection"] as? String == "7")
        let request = try #require(entry["request"] as? [String: Any])
        let headers = try #require(request["headers"] as? [[String: String]])
        #expect(headers.map { $0["name"]! } == ["Host", "Authorization", "Cookie", "Accept", "X-Dup", "X-Dup"])
        #expect(headers.filter { $0["name"] == "X-Dup" }.map { $0["value"]! } == ["one", "two"])
        #expect((request["queryString"] as? [[String: String]]) == [["name": "token", "value": "abc123"], ["name": "page", "value": "2"]])
        let response = try #require(entry["response"] as? [String: Any])
        let content = try #require(response["content"] as? [String: Any])
        #expect(content["text"] as? String == #"{"users":["ann"]}"#)
        #expect(content["encoding"] == nil)
        #expect(content["mimeType"] as? String == "application/json; charset=utf-8")

        let failed = try #require(try JSONSerialization.jsonObject(with: Data(HARWriter.entryJSON(for: Samples.failed).utf8)) as? [String: Any])
        let postData = try #require((failed["request"] as? [String: Any])?["postData"] as? [String: Any])
        #expect(postData["text"] as? String == #"{"a":"b c"}"#)
        #expect(postData["mimeType"] as? String == "application/json")
        #expect((failed["response"] as? [String: Any])?["status"] as? Int == 0)
        #expect((failed["timings"] as? [String: Double])?["wait"] == 3)
    }

    @Test func appendsToItsOwnFileAndRepairsATornLastEntry() throws {
        let path = TestFiles.directory().appendingPathComponent("resume.har").path
        var writer = try HARWriter(path: path, creatorVersion: "1")
        writer.record(Samples.plain)
        writer.record(Samples.failed)
        writer.close()
        #expect(try TestFiles.entries(path).count == 2)

        writer = try HARWriter(path: path, creatorVersion: "1")
        writer.record(Samples.binaryBody)
        writer.close()
        #expect(try TestFiles.entries(path).count == 3)

        // What a kill in the middle of the one write can leave: a partial entry line where the trailer was.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes.removeLast(HARFile.trailer.count)
        bytes.append(Data(#",{"startedDateTime":"2023-11-14T22:1"#.utf8))
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { try TestFiles.json(path) }

        let warnings = Warnings()
        let file = try LogFile(path: path, append: false)
        let har = try HARFile(file: file, creatorVersion: "1", warn: warnings.add)
        #expect(warnings.all.count == 1)
        #expect(warnings.all.first?.contains("ended inside an entry") == true)
        #expect(try TestFiles.entries(path).count == 3)
        try har.append(Array(HARWriter.entryJSON(for: Samples.challenged).utf8))
        #expect(try TestFiles.entries(path).count == 4)
        har.close()

        // A write torn after its first two bytes turns the old trailer `]}}` into `,{}` + `}`: an object, not an entry.
        bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes.replaceSubrange((bytes.count - HARFile.trailer.count)..<(bytes.count - 2), with: Data(",{".utf8))
        try bytes.write(to: URL(fileURLWithPath: path))
        let again = Warnings()
        let reopened = try LogFile(path: path, append: false)
        _ = try HARFile(file: reopened, creatorVersion: "1", warn: again.add)
        reopened.close()
        #expect(again.all.count == 1)
        #expect(try TestFiles.entries(path).count == 4)
    }

    @Test func refusesAFileItDidNotWrite() throws {
        let path = TestFiles.directory().appendingPathComponent("other.har").path
        let original = #"{"log":{"version":"1.2","creator":{"name":"Firefox","version":"1"},"entries":[]}}"#
        try original.write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(throws: LogFileError.self) { try HARWriter(path: path, creatorVersion: "1") }
        #expect(error.isForeignFile)
        #expect(error.description.contains("is not a HAR file written by hookproxy"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == original)
    }

    /// A file this process just closed can still be locked for a moment by a child it is starting (between fork and
    /// exec the child shares the open file). Seen as a flake of `appendsToItsOwnFileAndRepairsATornLastEntry` while
    /// another test spawned processes: the reopen waits for such a lock instead of calling it another hookproxy's.
    @Test func ownLockOnItsWayOutIsWaitedFor() throws {
        let path = TestFiles.directory().appendingPathComponent("own-lock.har").path
        let other = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(other >= 0 && flock(other, LOCK_EX | LOCK_NB) == 0)
        let release = Thread { usleep(100_000); close(other) }
        release.start()
        let writer = try HARWriter(path: path, creatorVersion: "1")
        writer.close()
    }

    @Test func secondWriterOnTheSameFileIsRefused() throws {
        let path = TestFiles.directory().appendingPathComponent("locked.har").path
        let first = try HARWriter(path: path, creatorVersion: "1")
        let error = try #require(throws: LogFileError.self) { try HARWriter(path: path, creatorVersion: "1") }
        #expect(error.isLocked)
        #expect(error.description.hasPrefix("hookproxy: \(path) is being written by another hookproxy"))
        // another process sees the lock too
        let (status, _, _) = try TestFiles.run("/usr/bin/flock", ["-n", path, "true"])
        #expect(status != 0)
        first.close()
        // released on close
        let second = try HARWriter(path: path, creatorVersion: "1")
        second.close()
    }

    @Test func lockHeldByAnotherProcessNamesItsPid() async throws {
        let path = TestFiles.directory().appendingPathComponent("held.har").path
        let holder = ChildProcess()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        // -o: only flock(1) itself holds the lock; for up to 60 s (killed below): under a loaded machine 4 s ran out
        // before this test's loop saw the lock.
        holder.arguments = ["-o", path, "sleep", "60"]
        try holder.run()
        // never wait out the holder on a thread: the test's tasks share a pool of as many threads as cores
        defer { kill(holder.processIdentifier, SIGKILL) }
        var error: LogFileError?
        for _ in 0..<250 { // until flock(1) holds it
            do { try HARWriter(path: path, creatorVersion: "1").close(); try await Task.sleep(for: .milliseconds(20)) }
            catch let e as LogFileError { error = e; break }
        }
        let locked = try #require(error)
        #expect(locked.isLocked)
        #expect(locked.description.contains("(pid \(holder.processIdentifier))"), "\(locked)")
    }

    @Test func openErrorsSayWhatToFix() throws {
        let directory = TestFiles.directory()
        let missing = directory.appendingPathComponent("no/such/dir/x.har").path
        let error = try #require(throws: LogFileError.self) { try HARWriter(path: missing, creatorVersion: "1") }
        #expect(error.isDirectoryMissing)
        #expect(error.description == "hookproxy: cannot create \(missing): directory \(directory.path)/no/such/dir does not exist")
        let isDirectory = try #require(throws: LogFileError.self) { try JSONLWriter(path: directory.path) }
        #expect(isDirectory.description == "hookproxy: \(directory.path) is a directory; give a file path")
        // /proc exists and refuses new files with ENOENT: the message must not claim the directory is missing.
        let inProc = try #require(throws: LogFileError.self) { try HARWriter(path: "/proc/hookproxy-test.har", creatorVersion: "1") }
        #expect(!inProc.isDirectoryMissing)
        #expect(inProc.description == "hookproxy: cannot create /proc/hookproxy-test.har: No such file or directory")
    }
}

/// Collects warnings from a writer thread.
final class Warnings: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    var add: @Sendable (String) -> Void { { [self] in lock.lock(); messages.append($0); lock.unlock() } }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return messages }
}
