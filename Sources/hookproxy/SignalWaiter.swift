import Dispatch
import Foundation

/// Catches SIGINT and SIGTERM so the proxy can shut down cleanly. Installed before the listening line is
/// printed, so a signal sent right after it is never lost to the default action.
final class SignalWaiter: @unchecked Sendable {
    private let lock = NSLock()
    private var received = false
    private var continuation: CheckedContinuation<Void, Never>?
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
            lock.lock()
            if received {
                lock.unlock()
                continuation.resume()
            } else {
                self.continuation = continuation
                lock.unlock()
            }
        }
    }

    private func signalled() {
        lock.lock()
        received = true
        let pending = continuation
        continuation = nil
        lock.unlock()
        pending?.resume()
    }
}
