#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Out of file descriptors (or kernel memory), accept(2) fails at once for every client waiting in the listen
/// backlog, and the listening socket stays readable. NIO's `AcceptBackoffHandler` does not stop that: it delays the
/// next `read()` the pipeline asks for, but when accept fails before any succeeded in a wake-up, NIO still counts
/// the read as pending (it clears that only on an accepted connection), so it never asks for another: the listener
/// stays in epoll, which wakes the loop again at once (thousands of failed accept4 a second, a core). This handler
/// turns autoRead off instead, which takes the listener out of epoll, and back on after `delay`: then one accept is
/// tried, and the clients in the backlog are taken as soon as descriptors are free again.
final class AcceptBackoff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = any Channel
    static let delay = TimeAmount.milliseconds(100)
    private var resume: Scheduled<Void>?

    /// The errors NIO keeps a listener open for that a retry cannot clear at once (not ECONNABORTED: one client).
    static func isExhaustion(_ error: any Error) -> Bool {
        guard let error = error as? IOError else { return false }
        return [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.errnoCode)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if resume == nil, AcceptBackoff.isExhaustion(error), let options = context.channel.syncOptions,
           (try? options.setOption(.autoRead, value: false)) != nil {
            let channel = context.channel
            resume = context.eventLoop.assumeIsolated().scheduleTask(in: AcceptBackoff.delay) { [self] in
                resume = nil
                try? channel.syncOptions?.setOption(.autoRead, value: true)
            }
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
        context.fireChannelInactive()
    }
}
