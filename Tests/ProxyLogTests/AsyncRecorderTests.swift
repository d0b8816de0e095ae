import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

/// A sink that blocks every write until released, like a disk that cannot keep up.
final class StuckSink: LogSink, @unchecked Sendable {
    let gate = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var ids: [Int] = []
    var written: [Int] { lock.lock(); defer { lock.unlock() }; return ids }
    func write(_ flow: FlowRecord) {
        gate.wait()
        lock.lock(); ids.append(flow.id); lock.unlock()
    }
    func sync() {}
    func close() {}
}

@Suite struct AsyncRecorderTests {
    @Test func fullQueueDropsAndWarnsInsteadOfBlocking() {
        let sink = StuckSink()
        let warnings = Warnings()
        let recorder = AsyncRecorder(name: "test", sink: sink, redactor: Redactor(), capacity: 5, warnEvery: 4,
                                     warn: warnings.add)
        var flow = Samples.plain
        let started = Date()
        for id in 0..<25 {
            flow.id = id
            recorder.record(flow)
        }
        #expect(Date().timeIntervalSince(started) < 0.5) // never waited for the stuck writer
        // 5 queued, and a few taken by the writer thread before the queue filled (how many depends on scheduling)
        #expect((14...20).contains(recorder.dropped), "dropped \(recorder.dropped)")
        #expect(warnings.all.first == "hookproxy: log writer behind (test), dropped 1 entries")
        #expect(warnings.all.contains("hookproxy: log writer behind (test), dropped 4 entries"))
        for _ in 0..<25 { sink.gate.signal() }
        recorder.close() // drains what was queued
        #expect(sink.written.count == 25 - recorder.dropped)
        #expect(sink.written == sink.written.sorted())
        recorder.record(flow) // after close: ignored, no crash
    }

    @Test func multiRecorderFansOutInOrder() throws {
        let directory = TestFiles.directory()
        let har = directory.appendingPathComponent("m.har").path
        let jsonl = directory.appendingPathComponent("m.jsonl").path
        let multi = MultiRecorder([try HARWriter(path: har, creatorVersion: "1"), try JSONLWriter(path: jsonl)])
        for flow in Samples.all { multi.record(flow) }
        multi.close()
        #expect(try TestFiles.entries(har).count == Samples.all.count)
        #expect(try JSONLWriterTests.lines(jsonl).count == Samples.all.count)
    }
}
