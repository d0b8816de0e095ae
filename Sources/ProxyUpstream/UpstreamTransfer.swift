/// The caller's handle on one upstream transfer. Sendable; it holds no curl state, only the transfer's number and
/// its loop's engine, so a late `resume` or `cancel` (after the transfer ended) reaches nothing.
public final class UpstreamTransfer: Sendable {
    let id: UInt64
    /// Nil for a request that could not start (its failure is already reported).
    private let engine: LoopEngine?

    init(id: UInt64, engine: LoopEngine?) {
        self.id = id
        self.engine = engine
    }

    /// Asks libcurl to continue a direction that a body callback paused. Any thread; on the transfer's loop (outside
    /// a curl callback) it takes effect before returning.
    public func resume() {
        let id = self.id
        engine?.perform { $0.resume(id) }
    }

    /// Stops the transfer; `didComplete` is not called. Any thread; on the transfer's loop (outside a curl
    /// callback) it takes effect before returning.
    public func cancel() {
        let id = self.id
        engine?.perform { $0.cancel(id) }
    }
}
