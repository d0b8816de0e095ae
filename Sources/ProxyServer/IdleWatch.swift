import NIOCore

/// The client connection's `--idle-timeout` clock, first in its pipeline: fires NIO's
/// `IdleStateHandler.IdleStateEvent.read` when nothing was read for the timeout, and `.write` when no written byte
/// left for the socket for the timeout (and again every timeout after that), as `IdleStateHandler(readTimeout:,
/// writeTimeout:)` does. The handlers after it decide what a silence means.
///
/// It learns what NIO's handler learns from a promise on every write (two or three a response, each an allocation
/// and a callback) from counters: the bytes written through it, less the bytes the channel still holds
/// (`bufferedWritableBytes`), is what went to the socket. It reads the clock at each read batch and each flush, and
/// looks at the counters only when its one timer fires. A write that leaves at its flush (the usual case) counts
/// from that flush; one that drains later counts from the check that saw bytes leave. While the channel holds
/// bytes (seen at a check, or at a flush that left it past its high-water mark), checks come every eighth of the
/// timeout, so a client that stops reading is let go at most that much later than NIO's handler would.
///
/// A client that reads slowly keeps the socket from taking more for long stretches: the kernel wakes a writer only
/// once a third of its send buffer is free (about 1.3 MiB of 4 MiB), which takes a client reading at 200 KB/s over
/// 6 s. So while the channel holds bytes, a check that sees none leave asks the kernel how much the client
/// acknowledged (`AcknowledgedBytes`): a client that took more since the last check is still reading. (Without it, a
/// download read steadily at 200 KB/s was cut at about 4 MB with `--idle-timeout 2s`.) Event-loop bound.
final class IdleWatch: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    let timeout: TimeAmount
    /// The bytes the channel holds, not yet taken by the socket (tests give their own).
    private let heldBytes: (any Channel) -> Int
    /// The bytes the client has acknowledged (tests give their own).
    private let acknowledged: (any Channel) -> UInt64
    private var acknowledgedAtLastCheck: UInt64 = 0
    private var timer: Scheduled<Void>?
    private var timerDeadline = NIODeadline.distantFuture
    private var reading = false
    private var lastRead = NIODeadline.uptimeNanoseconds(0)
    private var lastFlush = NIODeadline.uptimeNanoseconds(0)
    /// When written bytes were last seen leaving (or the watch started).
    private var lastWriteProgress = NIODeadline.uptimeNanoseconds(0)
    /// Bytes written through this handler since the connection began.
    private var written: Int64 = 0
    /// `written` less what the channel held, at the last check: the bytes that had gone to the socket then.
    private var sentAtLastCheck: Int64 = 0
    private var lastCheck = NIODeadline.uptimeNanoseconds(0)

    init(timeout: TimeAmount, heldBytes: @escaping (any Channel) -> Int = { $0.queuedBytes },
         acknowledged: @escaping (any Channel) -> UInt64 = { $0.acknowledgedBytes }) {
        self.timeout = timeout
        self.heldBytes = heldBytes
        self.acknowledged = acknowledged
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if reading {
            reading = false
            lastRead = context.eventLoop.now
        }
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        written &+= Int64(unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        lastFlush = context.eventLoop.now
        context.flush()
        // Past the high-water mark the channel holds bytes the socket did not take: look again soon, so that what
        // leaves from now on is seen within an eighth of the timeout, not credited to a check up to a timeout away.
        if !context.channel.isWritable { look(at: lastFlush + glance, context) }
    }

    // MARK: the timer

    private func start(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        let now = context.eventLoop.now
        (lastRead, lastWriteProgress, lastCheck) = (now, now, now)
        schedule(at: now + timeout, context)
    }

    /// How often the counters are looked at while the channel holds bytes.
    private var glance: TimeAmount { .nanoseconds(timeout.nanoseconds / 8) }

    private func schedule(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in check(context) }
    }

    /// Brings the timer forward to `deadline` if it is set for later.
    private func look(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        guard let pending = timer, timerDeadline > deadline else { return }
        pending.cancel()
        schedule(at: deadline, context)
    }

    private func check(_ context: ChannelHandlerContext) {
        timer = nil
        guard context.channel.isActive else { return }
        let now = context.eventLoop.now
        let held = Int64(heldBytes(context.channel))
        let sent = written &- held
        if sent != sentAtLastCheck {
            // Bytes left since the last check. All gone: they left at the last flush, or after the last check
            // if that was later. Some still held: the socket is draining, so it was writing until now.
            lastWriteProgress = held == 0 ? max(lastFlush, lastCheck) : now
            sentAtLastCheck = sent
        } else if held > 0 {
            // Nothing left the channel: the socket's buffer is full. The client is still reading if it took more.
            let taken = acknowledged(context.channel)
            if taken > acknowledgedAtLastCheck { lastWriteProgress = now }
            acknowledgedAtLastCheck = taken
        }
        lastCheck = now
        var readDue = lastRead + timeout
        var writeDue = lastWriteProgress + timeout
        if readDue <= now {
            // The next read-idle comes a full timeout later, unless something is read.
            (readDue, lastRead) = (now + timeout, now)
            if !reading { context.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.read) }
        }
        if writeDue <= now {
            (writeDue, lastWriteProgress) = (now + timeout, now)
            if context.channel.isActive { context.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.write) }
        }
        guard context.channel.isActive, timer == nil else { return }
        let nextLook = now + (held > 0 ? glance : timeout)
        schedule(at: min(readDue, writeDue, nextLook), context)
    }
}
