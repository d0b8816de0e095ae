import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

/// The log files are written a batch at a time (the records that reached the writer thread together): nothing of a
/// batch is in the file before `endBatch`, all of it after, one entry or line per record, and the file is valid
/// between batches.
@Suite struct LogBatchTests {
    @Test func aHARBatchIsOneWriteOfWholeEntriesAndTheFileStaysValid() throws {
        let path = TestFiles.directory().appendingPathComponent("batch.har").path
        let har = try HARFile(file: try LogFile(path: path, append: false), creatorVersion: "1")
        let flows = Samples.all
        for flow in flows { har.write(flow) }
        #expect(try TestFiles.entries(path).isEmpty, "kept until the batch ends")
        har.endBatch()
        #expect(try TestFiles.entries(path).count == flows.count)
        #expect(har.entryCount == flows.count)
        // One entry per line: the first without a comma, the others after one (what reopening relies on).
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let lines = text.split(separator: "\n").dropFirst().dropLast()
        #expect(lines.count == flows.count)
        #expect(lines.first?.hasPrefix("{") == true)
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix(",{") })

        // A second batch after the first, and an entry appended on its own after a kept one.
        har.write(flows[0])
        har.endBatch()
        har.write(flows[1])
        try har.append(Array(HARWriter.entryJSON(for: flows[2]).utf8))
        #expect(try TestFiles.entries(path).count == flows.count + 3)
        har.write(flows[0])
        har.close()  // writes what was kept
        #expect(try TestFiles.entries(path).count == flows.count + 4)

        let reopened = try HARFile(file: try LogFile(path: path, append: false), creatorVersion: "1")
        reopened.write(flows[1])
        reopened.close()
        #expect(try TestFiles.entries(path).count == flows.count + 5)
    }

    @Test func aJSONLBatchIsWholeLinesWithNothingBetweenThem() throws {
        let path = TestFiles.directory().appendingPathComponent("batch.jsonl").path
        let file = try LogFile(path: path, append: true)
        let sink = JSONLSink(file: file)
        for flow in Samples.all { sink.write(flow) }
        #expect(try String(contentsOfFile: path, encoding: .utf8).isEmpty, "kept until the batch ends")
        sink.endBatch()
        let lines = try JSONLWriterTests.lines(path)
        #expect(lines.count == Samples.all.count)
        #expect(lines.map { $0["id"] as? Int } == Samples.all.map(\.id))
        sink.write(Samples.plain)
        sink.close()
        #expect(try JSONLWriterTests.lines(path).count == Samples.all.count + 1)
    }
}
