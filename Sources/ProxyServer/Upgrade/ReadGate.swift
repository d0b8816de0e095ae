import NIOCore

/// Holds a channel's reads while the other side of a relay is behind: a `read` asked meanwhile is kept and
/// forwarded on `resume` (GUIDE example 3: never call `context.read()` unconditionally). A value inside an
/// event-loop-bound handler.
struct ReadGate {
    private(set) var paused = false
    private var pending = false

    /// The handler's `read(context:)`: forwards it, or keeps it while paused.
    mutating func read(_ context: ChannelHandlerContext) {
        if paused { pending = true } else { context.read() }
    }

    mutating func pause() { paused = true }

    /// Lets reads through again, forwarding the one kept meanwhile.
    mutating func resume(_ context: ChannelHandlerContext?) {
        guard paused else { return }
        paused = false
        if pending {
            pending = false
            context?.read()
        }
    }
}
