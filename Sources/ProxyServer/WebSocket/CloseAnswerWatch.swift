import NIOCore
import ProxyUpstream

/// Bounds the close handshake (RFC 6455 §7.1). Once one end's close frame went on to the other, that other end is
/// waited for as long as it keeps sending (what it sends before its own close frame still passes) or taking what was
/// sent to it (a close frame queued behind megabytes reaches a slow reader late: it answers only once it read it),
/// and at most a timeout (`--idle-timeout`, the client's or the upstream one) after the last byte it sent or took.
/// Once both close frames passed, the server is waited for to close its TCP connection, as it should first
/// (§7.1.1), for a short while (Chromium waits 2 s) after it last took a byte. An open session has no idle timeout
/// (SPEC), so without this a peer that never answered a close frame, or a server that kept its connection open after
/// the handshake, held the session, both connections and a `--max-connections` slot for as long as it stayed
/// connected.
///
/// What an end took is the count of bytes its kernel acknowledged (`AcknowledgedBytes`, through `taken`), read at
/// checks a quarter of the timeout apart (`PeerProgress`), not per byte. Costs nothing before it starts (`noteHeard`
/// returns at its first check); once started it reads the clock once per `noteHeard`.
///
/// Event-loop bound: owned by a `WebSocketSession`, on the client connection's loop.
final class CloseAnswerWatch {
    /// What is awaited.
    enum Awaited {
        /// That end's close frame.
        case client, server
        /// The server's TCP close, after both close frames.
        case serverClose
    }

    private var check: Scheduled<Void>?
    private var progress: PeerProgress?
    private(set) var awaited: Awaited?

    /// Starts waiting for `what`, in place of the wait under way unless that is for `what` already (then it does
    /// nothing). `taken` counts the bytes the awaited end has taken (acknowledged) so far. `silent` runs on `loop`
    /// when `what` did not come in time: when its end sent nothing (for the server's close: sent nothing that counts)
    /// and took nothing for `timeout`. The watch has stopped by then.
    func start(awaiting what: Awaited, timeout: TimeAmount, on loop: any EventLoop, taken: @escaping () -> UInt64,
               silent: @escaping () -> Void) {
        guard awaited != what else { return }
        cancel()
        awaited = what
        let progress = PeerProgress(timeout: timeout, acknowledged: taken())
        self.progress = progress
        schedule(at: progress.firstCheck, on: loop, taken: taken, silent: silent)
    }

    /// `end` sent bytes: when its close frame is awaited, the wait starts again from now.
    func noteHeard(from end: Awaited) {
        guard awaited == end, check != nil else { return }
        progress?.note()
    }

    func cancel() {
        check?.cancel()
        check = nil
    }

    private func schedule(at deadline: NIODeadline, on loop: any EventLoop, taken: @escaping () -> UInt64,
                          silent: @escaping () -> Void) {
        check = loop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            check = nil
            guard let next = progress?.check(acknowledged: taken()) else { return silent() }
            schedule(at: next, on: loop, taken: taken, silent: silent)
        }
    }
}

@available(*, unavailable)
extension CloseAnswerWatch: Sendable {}
