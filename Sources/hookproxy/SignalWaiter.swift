import Dispatch
import Glibc
import Synchronization

/// Catches SIGINT and SIGTERM so the proxy can shut down cleanly: the first starts the shutdown, a second one
/// (Ctrl-C again) cuts its grace period short. Installed before the listening line is printed, so a signal sent
/// right after it is never lost to the default action.
final class SignalWaiter: @unchecked Sendable {
    private struct State {
        var received = 0
        var waiting: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private var sources: [any DispatchSourceSignal] = []

    static func install() -> SignalWaiter {
        let waiter = SignalWaiter()
        let queue = DispatchQueue(label: "hookproxy.signals")
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler { waiter.signalled() }
            source.resume()
            waiter.sources.append(source)
        }
        return waiter
    }

    /// Returns once SIGINT or SIGTERM arrived (at once if one already did).
    func wait() async { await wait(count: 1) }

    /// Returns once a second SIGINT or SIGTERM arrived.
    func waitForSecond() async { await wait(count: 2) }

    private func wait(count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let received = state.withLock { state in
                if state.received < count { state.waiting.append((count, continuation)) }
                return state.received >= count
            }
            if received { continuation.resume() }
        }
    }

    private func signalled() {
        let due = state.withLock { state in
            state.received += 1
            let received = state.received
            let due = state.waiting.filter { $0.count <= received }.map(\.continuation)
            state.waiting.removeAll { $0.count <= received }
            return due
        }
        for continuation in due { continuation.resume() }
    }
}
