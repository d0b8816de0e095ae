import NIOCore
import ProxyUpstream
import Testing

/// `PeerProgress` as a pure value on a clock of the test's own: a peer is stalled once a whole timeout passed without
/// progress, found at checks a quarter of the timeout apart.
struct PeerProgressTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static func at(_ ms: Int64) -> NIODeadline { start + .milliseconds(ms) }

    @Test func aPeerThatNeverMovesIsStalledATimeoutAfterTheStart() {
        var progress = PeerProgress(timeout: .milliseconds(1000), acknowledged: 5, now: Self.start)
        #expect(progress.firstCheck == Self.at(250))
        var now = progress.firstCheck
        var checks = 0
        while let next = progress.check(acknowledged: 5, now: now) {
            #expect(next > now)
            now = next
            checks += 1
        }
        #expect(now == Self.at(1000) && checks == 3)
    }

    /// The acknowledgement of the last bytes sent comes just after the start: it moves the end by at most a quarter
    /// (checked once per timeout, it moved it a whole timeout).
    @Test func anAcknowledgementJustAfterTheStartCountsFromTheCheckThatSawIt() {
        var progress = PeerProgress(timeout: .milliseconds(1000), acknowledged: 0, now: Self.start)
        var next = progress.check(acknowledged: 100, now: Self.at(250))
        var now = Self.at(250)
        while let due = next {
            now = due
            next = progress.check(acknowledged: 100, now: now)
        }
        #expect(now == Self.at(1250))
    }

    @Test func progressTheOwnerSawOrNotedKeepsThePeerAlive() {
        var progress = PeerProgress(timeout: .milliseconds(1000), acknowledged: 0, now: Self.start)
        #expect(progress.check(acknowledged: 0, progressed: true, now: Self.at(900)) == Self.at(1150))
        progress.note(at: Self.at(1800))
        #expect(progress.check(acknowledged: 0, now: Self.at(2700)) == Self.at(2800))
        #expect(progress.check(acknowledged: 0, now: Self.at(2800)) == nil)
    }

    @Test func aCountThatFallsIsNoProgressAndNotRemembered() {
        // (TCP_INFO read as 0 when the kernel cannot say.)
        var progress = PeerProgress(timeout: .milliseconds(400), acknowledged: 50, now: Self.start)
        #expect(progress.check(acknowledged: 0, now: Self.at(100)) == Self.at(200))
        #expect(progress.check(acknowledged: 50, now: Self.at(200)) == Self.at(300))
        #expect(progress.check(acknowledged: 50, now: Self.at(400)) == nil)
    }
}
