import NIOCore

/// Bounds how long a relay whose server has finished (closed, reset, or the session ended) waits for its client to
/// take what is still queued for it. An open session has no idle timeout (SPEC), and the `IdleWatch` left the
/// pipeline at the upgrade, so without this a client that stopped reading held its connection, and its
/// `--max-connections` slot, for as long as it stayed connected.
///
/// The mirror of `UpstreamConnection.closeWhenSent` toward the client: checked once per `timeout`
/// (`--idle-timeout`), the client is let go when, since the last check, it took nothing: the bytes queued on its
/// channel did not shrink, the relay handed it nothing new (the relay hands bytes on only once the channel is
/// writable again, which the client's reading brings about), and the kernel sent it no new data (`TCP_INFO`'s
/// last-data-sent: the kernel wakes a writer only once a third of its send buffer is free, so a slow reader can take
/// bytes for a while with the channel's backlog standing still). A client that reads slowly but keeps reading is not
/// cut off.
///
/// With `everythingQueued` (`LingeringClose`: the relay has handed over its last byte), an empty channel is no
/// progress: the client then counts as taking bytes only while the kernel still sends it some.
///
/// Event-loop bound: owned by the relay's handler (or the lingering close), on the client connection's loop.
final class ClientDrainWatch {
    private let timeout: TimeAmount
    private let everythingQueued: Bool
    private var check: Scheduled<Void>?
    private var backlog = Int.max
    private var delivered = false
    private var started = false
    private var stopped = false

    init(timeout: TimeAmount, everythingQueued: Bool = false) {
        self.timeout = timeout
        self.everythingQueued = everythingQueued
    }

    /// Starts watching `context`'s channel (once; later calls do nothing). `stalled` runs on the loop when a whole
    /// `timeout` passed in which the client took nothing; the watch has stopped for good by then.
    func start(_ context: ChannelHandlerContext, stalled: @escaping () -> Void) {
        guard !started, context.channel.isActive else { return }
        started = true
        backlog = context.channel.queuedBytes
        schedule(context.channel, stalled: stalled)
    }

    /// The relay handed the client more bytes (it had room for them).
    func noteDelivered() { delivered = true }

    func cancel() {
        stopped = true
        check?.cancel()
        check = nil
    }

    private func schedule(_ channel: any Channel, stalled: @escaping () -> Void) {
        check = channel.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            check = nil
            guard channel.isActive else { return }
            let now = channel.queuedBytes
            let progressed = delivered || now < backlog || (now == 0 && !everythingQueued)
            delivered = false
            backlog = now
            if progressed { return schedule(channel, stalled: stalled) }
            Self.kernelSentData(on: channel, within: timeout).assumeIsolated().whenComplete { [self] sent in
                guard !stopped, channel.isActive else { return }
                if case .success(true) = sent { return schedule(channel, stalled: stalled) }
                stopped = true
                stalled()
            }
        }
    }

    /// Whether the kernel sent new data on `channel`'s socket within `window` (a window probe to a client that reads
    /// nothing carries none).
    private static func kernelSentData(on channel: any Channel, within window: TimeAmount) -> EventLoopFuture<Bool> {
        guard let socket = channel as? any SocketOptionProvider else { return channel.eventLoop.makeSucceededFuture(false) }
        return socket.getTCPInfo().map { info in
            TimeAmount.milliseconds(Int64(info.tcpi_last_data_sent)) < window
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
}
