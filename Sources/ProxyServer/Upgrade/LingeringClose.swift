import NIOCore

/// Closes a relay's client connection without losing what is still on its way to the client. Closing a socket
/// while bytes the peer sent sit unread in it makes the kernel reset the connection (RFC 1122 §4.2.2.13), and the
/// reset destroys what the kernel had not yet delivered: a client that was still sending when its session ended got
/// neither the close frame nor the frames before it. So the output is shut down once everything written has left
/// (NIO queues the shutdown behind the pending writes: a FIN after the last byte), what the client still sends is read
/// and dropped, and the connection closes when the client closes its side (NIO closes a channel at its end of input,
/// half-closure being off), or once a whole `timeout` (`--idle-timeout`) passed in which the client took nothing
/// (`ClientDrainWatch`): a client that reads slowly gets every byte, and one that reads nothing, or keeps its side
/// open once it has everything, is let go. Where the output cannot be shut down alone (TLS that cannot), it closes
/// at once, as before. Event-loop bound.
enum LingeringClose {
    static func start(_ context: ChannelHandlerContext, timeout: TimeAmount) {
        let channel = context.channel
        guard channel.isActive else { return }
        let bound = ClientDrainWatch(timeout: timeout, everythingQueued: true)
        bound.start(context) { channel.close(promise: nil) }
        channel.closeFuture.assumeIsolated().whenComplete { _ in bound.cancel() }
        let shut = channel.eventLoop.makePromise(of: Void.self)
        shut.futureResult.whenFailure { _ in channel.close(promise: nil) }
        context.close(mode: .output, promise: shut)
        context.read()
    }
}
