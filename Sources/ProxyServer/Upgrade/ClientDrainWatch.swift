import NIOCore
import ProxyUpstream

/// Bounds how long a relay whose server has finished (closed, reset, or the session ended) waits for its client to
/// take what is still queued for it. An open session has no idle timeout (SPEC), and the `IdleWatch` left the
/// pipeline at the upgrade, so without this a client that stopped reading held its connection, and its
/// `--max-connections` slot, for as long as it stayed connected.
///
/// The mirror of `UpstreamConnection.closeWhenSent` toward the client (`PeerProgress`: checked every quarter of
/// `timeout`, `--idle-timeout`): the client is let go once a whole `timeout` passed in which it took nothing: the bytes
/// queued on its channel did not shrink, the relay handed it nothing new (the relay hands bytes on only once the channel is
/// writable again, which the client's reading brings about), and it acknowledged no new bytes (`AcknowledgedBytes`:
/// the kernel wakes a writer only once a third of its send buffer is free, so a slow reader can take bytes for a
/// while with the channel's backlog standing still). A client that reads slowly but keeps reading is not cut off.
///
/// With `everythingQueued` (`LingeringClose`: the relay has handed over its last byte), an empty channel is no
/// progress: the client then counts as taking bytes only while it acknowledges more.
///
/// Event-loop bound: owned by the relay's handler (or the lingering close), on the client connection's loop.
final class ClientDrainWatch {
    private let timeout: TimeAmount
    private let everythingQueued: Bool
    private var check: Scheduled<Void>?
    private var backlog = Int.max
    private var progress: PeerProgress?
    private var delivered = false
    private var stopped = false

    init(timeout: TimeAmount, everythingQueued: Bool = false) {
        self.timeout = timeout
        self.everythingQueued = everythingQueued
    }

    /// Starts watching `context`'s channel (once; later calls do nothing). `stalled` runs on the loop when a whole
    /// `timeout` passed in which the client took nothing; the watch has stopped for good by then.
    func start(_ context: ChannelHandlerContext, stalled: @escaping () -> Void) {
        guard progress == nil, context.channel.isActive else { return }
        let channel = context.channel
        backlog = channel.queuedBytes
        let progress = PeerProgress(timeout: timeout, acknowledged: channel.acknowledgedBytes)
        self.progress = progress
        schedule(channel, at: progress.firstCheck, stalled: stalled)
    }

    /// The relay handed the client more bytes (it had room for them).
    func noteDelivered() { delivered = true }

    func cancel() {
        stopped = true
        check?.cancel()
        check = nil
    }

    private func schedule(_ channel: any Channel, at deadline: NIODeadline, stalled: @escaping () -> Void) {
        check = channel.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            check = nil
            guard !stopped, channel.isActive else { return }
            let queued = channel.queuedBytes
            let progressed = delivered || queued < backlog || (queued == 0 && !everythingQueued)
            delivered = false
            backlog = queued
            if let next = progress?.check(acknowledged: channel.acknowledgedBytes, progressed: progressed) {
                return schedule(channel, at: next, stalled: stalled)
            }
            stopped = true
            stalled()
        }
    }
}

@available(*, unavailable)
extension ClientDrainWatch: Sendable {}

extension Channel {
    /// Bytes written to the channel and not yet taken by its socket (0 when the channel cannot say).
    var queuedBytes: Int {
        (try? syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    /// How much the peer has acknowledged of what was sent (`AcknowledgedBytes`; 0 when it cannot say). On the
    /// channel's loop only: there the future is complete when returned, and its callback runs at once.
    var acknowledgedBytes: UInt64 {
        var count: UInt64 = 0
        AcknowledgedBytes.of(channel: self).assumeIsolated().whenSuccess { count = $0 }
        return count
    }
}
