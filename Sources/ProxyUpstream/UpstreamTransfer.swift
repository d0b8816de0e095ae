/// The caller's handle on one upstream transfer: the only part of it that leaves the curl thread. Sendable; it
/// holds no curl state, only the transfer's number, so a late `resume` or `cancel` (after the transfer ended)
/// reaches nothing.
public final class UpstreamTransfer: Sendable {
    let id: UInt64
    private let engine: UpstreamEngine

    init(id: UInt64, engine: UpstreamEngine) {
        self.id = id
        self.engine = engine
    }

    /// Asks libcurl to continue a direction that a body callback paused. Any thread.
    public func resume() {
        engine.enqueue(.resume(id))
    }

    /// Stops the transfer at once; `didComplete` is not called. Any thread.
    public func cancel() {
        engine.enqueue(.cancel(id))
    }
}
