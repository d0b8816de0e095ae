import NIOCore
import NIOEmbedded
@testable import ProxyServer
import Testing

/// `IdleWatch` on an `EmbeddedChannel`, on the embedded loop's clock: read-idle and write-idle at the timeout after
/// the last read and the last write that left, and again every timeout while the silence lasts.
struct IdleWatchTests {
    /// The idle events that reached the end of the pipeline, in order.
    final class Events: ChannelInboundHandler {
        typealias InboundIn = NIOAny
        var seen: [IdleStateHandler.IdleStateEvent] = []
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let idle = event as? IdleStateHandler.IdleStateEvent { seen.append(idle) }
        }
    }

    static func watched(timeout: TimeAmount = .seconds(1)) throws -> (EmbeddedChannel, Events) {
        let events = Events()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([IdleWatch(timeout: timeout), events])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
        return (channel, events)
    }

    @Test func aSilentConnectionIsIdleBothWaysAtTheTimeoutAndEveryTimeoutAfter() throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(999))
        #expect(events.seen.isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(events.seen == [.read, .write])
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(events.seen == [.read, .write, .read, .write])
    }

    @Test func aReadPutsOffReadIdleOnly() throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        try channel.writeInbound(ByteBuffer(string: "GET"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400))
        #expect(events.seen == [.write])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(599))
        #expect(events.seen == [.write])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(events.seen == [.write, .read])
    }

    @Test func aFlushedWritePutsOffWriteIdleOnly() throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        try channel.writeOutbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400))
        #expect(events.seen == [.read])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(599))
        #expect(events.seen == [.read])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(events.seen == [.read, .write])
    }

    @Test func steadyTrafficKeepsItQuiet() throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        for _ in 0..<10 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            try channel.writeInbound(ByteBuffer(string: "x"))
            try channel.writeOutbound(ByteBuffer(string: "y"))
        }
        #expect(events.seen.isEmpty)
    }

    @Test func aRemovedWatchFiresNothing() throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let watch = try channel.pipeline.syncOperations.handler(type: IdleWatch.self)
        try channel.pipeline.syncOperations.removeHandler(watch).wait()
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(events.seen.isEmpty)
    }
}
