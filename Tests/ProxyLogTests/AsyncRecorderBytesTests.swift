import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

/// Issue 11, item 13: the log queue is bounded by bytes too, not only by record count.
@Suite struct AsyncRecorderBytesTests {
    @Test func largeBodiesAreDroppedPastTheByteBound() {
        let sink = StuckSink()
        let warnings = Warnings()
        let recorder = AsyncRecorder(name: "bytes", sink: sink, redactor: Redactor(), capacity: 10_000,
                                     byteCapacity: 1 << 20, warnEvery: 100, warn: warnings.add)
        var flow = Samples.plain
        flow.responseBody = CapturedBody(bytes: [UInt8](repeating: 0x61, count: 300 * 1024), truncated: false)
        for id in 0..<20 {
            flow.id = id
            recorder.record(flow)
        }
        // about 1 MiB / 300 KiB records fit while the sink is stuck: everything else is dropped and counted
        #expect(recorder.dropped >= 15, "dropped \(recorder.dropped)")
        #expect(warnings.all.first?.contains("dropped 1 entries") == true, "\(warnings.all)")
        for _ in 0..<20 { sink.gate.signal() }
        recorder.close()
        #expect(sink.written.count == 20 - recorder.dropped)
    }
}
