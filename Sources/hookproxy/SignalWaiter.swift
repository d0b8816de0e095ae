import Dispatch
import Foundation
import Synchronization

/// Catches SIGINT and SIGTERM so the proxy can shut down cleanly. Installed before the listening line is
/// printed, so a signal sent right after it is never lost to the default action.
final class SignalWaiter: @unchecked Sendable {
    private let state = Mutex<(received: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))
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
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let received = state.withLock { state in
                if !state.received { state.continuation = continuation }
                return state.received
            }
            if received { continuation.resume() }
        }
    }

    private func signalled() {
        let pending = state.withLock { state in
            state.received = true
            defer { state.continuation = nil }
            return state.continuation
        }
        pending?.resume()
    }
}
