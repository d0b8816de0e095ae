import NIOPosix
import Synchronization

/// A `NIOThreadPool` whose threads start at its first use: a proxy that never transforms a body, tunnels through
/// `--upstream-proxy` or intercepts keeps none of them (each idle thread holds a stack and a malloc arena: ~12 KiB
/// resident). Thread-safe.
final class LazyThreadPool: Sendable {
    private let numberOfThreads: Int
    private let started = Mutex<NIOThreadPool?>(nil)

    init(numberOfThreads: Int) {
        self.numberOfThreads = numberOfThreads
    }

    /// The pool, started now if it was not yet. Any thread.
    var pool: NIOThreadPool {
        started.withLock { started in
            if let pool = started { return pool }
            let pool = NIOThreadPool(numberOfThreads: numberOfThreads)
            pool.start()
            started = pool
            return pool
        }
    }

    /// Shuts the pool down if it ever started; `wait` false: returns at once, the threads finish their work first.
    func shutdown(wait: Bool = true) async throws {
        guard let pool = started.withLock({ $0 }) else { return }
        if wait { try await pool.shutdownGracefully() } else { pool.shutdownGracefully { _ in } }
    }
}
