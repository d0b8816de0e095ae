import NIOCore
import NIOEmbedded
@testable import ProxyServer
import Testing

/// A flood of refused connections was one warning line each (a hostile tester counted 290 in one run); it is now
/// one line a second with a count.
@Suite struct ConnectionTrackerTests {
    @Test func refusalsAreReportedOnceASecondWithACount() {
        let tracker = ConnectionTracker(limit: 0)
        let start = NIODeadline.now()
        for _ in 0..<3 { #expect(!tracker.admit(EmbeddedChannel())) }
        #expect(tracker.refusalsToReport(now: start) == 3, "the first report goes out at once")
        for _ in 0..<2 { #expect(!tracker.admit(EmbeddedChannel())) }
        #expect(tracker.refusalsToReport(now: start + .milliseconds(500)) == nil, "held back within the second")
        #expect(tracker.claimLaterReport())
        #expect(!tracker.claimLaterReport(), "one later report is scheduled, not one per refusal")
        #expect(tracker.refusalsToReport(now: start + .seconds(1)) == 2)
        #expect(tracker.refusalsToReport(now: start + .seconds(3)) == nil, "nothing new to report")
        #expect(tracker.claimLaterReport(), "a report clears the schedule")
    }
}
