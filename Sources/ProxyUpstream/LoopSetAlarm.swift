internal import CEpoll
import Glibc
import NIOCore
import NIOPosix

/// Wakes a sleeping event loop, on its own thread, when its set of curl sockets (`LoopSocketSet`) becomes ready.
///
/// SwiftNIO has no public way to put a descriptor it does not read into a loop's selector, but it does watch an
/// eventfd it reads (a pipe channel). So the kernel is asked, once, to signal such an eventfd when the set's epoll
/// descriptor is readable: a Linux AIO poll (`IOCB_CMD_POLL` with `IOCB_FLAG_RESFD`), which the kernel completes in
/// the same wake-up that makes the set ready. The loop's selector then sees the eventfd, and the loop polls the set:
/// an upstream response that arrives while the loop sleeps costs no other thread's wake-up and no hop, as one that
/// arrives while it is busy never did. The `SocketWatcher` thread serves instead where the kernel refuses AIO (a
/// seccomp filter, `fs.aio-max-nr` reached, or no `CONFIG_AIO`).
///
/// One poll at most is outstanding: `arm` submits it when the loop goes to sleep, and its completion (`ready`) is
/// reported once. `@unchecked Sendable`: used on its loop only, as its `LoopEngine` is; NIO's channel initializer
/// merely carries it there.
final class LoopSetAlarm: @unchecked Sendable {
    /// What the alarm reports to its engine, on the loop.
    enum Event {
        /// The set became ready after `arm` (or was ready already).
        case ready
        /// The eventfd's channel closed or failed without `close`: the alarm is gone, and the set needs a watcher.
        case lost
    }

    private let aio: UInt64
    private let request: UnsafeMutablePointer<iocb>
    private let eventfd: Int32
    private let set: LoopSocketSet
    private let report: (Event) -> Void
    private var channel: (any Channel)?
    /// A poll is submitted and has not completed.
    private(set) var armed = false
    private var closed = false
    /// The AIO context exists (destroyed once; its id may then be another context's, so it is never used again).
    private var contextOpen = true
    /// `request` is allocated.
    private var requestHeld = true

    private init(aio: UInt64, request: UnsafeMutablePointer<iocb>, eventfd: Int32, set: LoopSocketSet,
                 report: @escaping (Event) -> Void) {
        self.aio = aio
        self.request = request
        self.eventfd = eventfd
        self.set = set
        self.report = report
    }

    deinit {
        closeKernelSide()
    }

    /// Sets one up for `set` on `loop`; the future (on `loop`) gives nil when the kernel or NIO refuses (the caller
    /// then uses the watcher thread). `report` runs on `loop`.
    static func open(for set: LoopSocketSet, on loop: any EventLoop,
                     report: @escaping (Event) -> Void) -> EventLoopFuture<LoopSetAlarm?> {
        let aio = hp_aio_open(4)
        guard aio != 0 else { return loop.makeSucceededFuture(nil) }
        let eventfd = hp_eventfd()
        guard eventfd >= 0, let request = hp_aio_request() else {
            if eventfd >= 0 { Glibc.close(eventfd) }
            hp_aio_close(aio)
            return loop.makeSucceededFuture(nil)
        }
        let alarm = LoopSetAlarm(aio: aio, request: request, eventfd: eventfd, set: set, report: report)
        return NIOPipeBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EventfdReader(alarm: alarm))
                }
            }
            .takingOwnershipOfDescriptor(input: eventfd)
            .map { channel -> LoopSetAlarm? in
                alarm.channel = channel
                return alarm
            }
            .flatMapErrorThrowing { _ -> LoopSetAlarm? in
                Glibc.close(eventfd)  // (NIO leaves it to us when it fails)
                alarm.closed = true
                alarm.closeKernelSide()
                return nil
            }
    }

    /// Asks the kernel to report the set's next readiness (at once if it is ready now). False when it refuses: the
    /// alarm is then no use, and the caller closes it.
    func arm() -> Bool {
        guard !closed, contextOpen else { return false }
        if armed { return true }
        var error = hp_aio_poll_readable(aio, request, set.descriptor, eventfd)
        if error == EAGAIN {
            _ = hp_aio_reap(aio)  // (a completion not taken yet holds a slot)
            error = hp_aio_poll_readable(aio, request, set.descriptor, eventfd)
        }
        armed = error == 0
        return armed
    }

    /// Cancels the outstanding poll and closes the eventfd's channel. Once or more.
    func close() {
        guard !closed else { return }
        closed = true
        closeKernelSide()
        channel?.close(promise: nil)
        channel = nil
    }

    /// The eventfd was signalled: the submitted poll completed.
    fileprivate func signalled() {
        guard !closed else { return }
        _ = hp_aio_reap(aio)
        guard armed else { return }
        armed = false
        report(.ready)
    }

    fileprivate func channelEnded() {
        guard !closed else { return }
        close()
        report(.lost)
    }

    /// Destroys the AIO context (which cancels a poll still outstanding, so the kernel no longer holds `request`),
    /// then frees the request.
    private func closeKernelSide() {
        destroyContext()
        guard requestHeld else { return }
        requestHeld = false
        free(request)
    }

    private func destroyContext() {
        guard contextOpen else { return }
        contextOpen = false
        hp_aio_close(aio)
    }

    /// Tests: the kernel side goes away under the alarm, as if `io_submit` began to fail. A poll outstanding ends
    /// as a cancelled one does (reported ready); the next `arm` fails.
    func failForTesting() {
        destroyContext()
        if armed {
            armed = false
            report(.ready)
        }
    }
}

/// Reads the alarm's eventfd on the loop (NIO does the read; each one takes the count) and tells the alarm.
private final class EventfdReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let alarm: LoopSetAlarm

    init(alarm: LoopSetAlarm) {
        self.alarm = alarm
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        alarm.signalled()
    }

    func channelInactive(context: ChannelHandlerContext) {
        alarm.channelEnded()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
