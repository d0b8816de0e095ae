import NIOCore
import Testing
@testable import ProxyServer

/// Reading the client stays paused while the pacer or the bridge holds it, and resumes only when neither does.
struct PacedUploadTests {
    @Test func readingResumesOnlyWhenNothingHoldsIt() {
        var upload = PacedUpload()
        let first = upload.hold(.pacing)          // first hold: pause now
        let second = upload.hold(.bridge)         // already paused
        let pacingGone = upload.release(.pacing)  // the bridge still holds it
        #expect(first && !second && !pacingGone)
        #expect(upload.isHeld(by: .bridge))
        let bridgeGone = upload.release(.bridge)  // nothing holds it: resume
        let again = upload.release(.bridge)       // not held: nothing to resume
        #expect(bridgeGone && !again)
    }

    @Test func aNewHopDropsWhatWaitedButKeepsTheHolds() {
        var upload = PacedUpload()
        upload.queue.append(ByteBuffer(string: "abc"))
        upload.endWaits = true
        _ = upload.hold(.pacing)
        upload.dropQueued()
        #expect(upload.queue.isEmpty)
        #expect(!upload.endWaits)
        #expect(upload.isHeld(by: .pacing))
    }
}
