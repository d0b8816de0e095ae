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

    /// What the channel holds, and what the client acknowledged, as the test says (an `EmbeddedChannel` holds
    /// nothing and has no TCP socket).
    final class Held {
        var bytes = 0
        var acknowledged: UInt64 = 0
    }

    static func watched(timeout: TimeAmount = .seconds(1), held: Held? = nil) throws -> (EmbeddedChannel, Events) {
        let events = Events()
        let channel = EmbeddedChannel()
        let watch = held.map { held in IdleWatch(timeout: timeout, heldBytes: { _ in held.bytes }, acknowledged: { _ in held.acknowledged }) }
            ?? IdleWatch(timeout: timeout)
        try channel.pipeline.syncOperations.addHandlers([watch, events])
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

    /// Traffic one way puts off that way's idle event only.
    @Test(arguments: [IdleStateHandler.IdleStateEvent.read, .write])
    func trafficOneWayPutsOffThatWaysIdleOnly(_ way: IdleStateHandler.IdleStateEvent) throws {
        let (channel, events) = try Self.watched()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let other: IdleStateHandler.IdleStateEvent = way == .read ? .write : .read
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(600))
        if way == .read {
            try channel.writeInbound(ByteBuffer(string: "GET"))
        } else {
            try channel.writeOutbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"))
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400))
        #expect(events.seen == [other])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(599))
        #expect(events.seen == [other])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(events.seen == [other, way])
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

    /// A client that reads part of a response and stops: write-idle comes a timeout after the bytes last moved, give
    /// or take the eighth of a timeout between looks while the channel holds bytes (was: up to two timeouts, the
    /// check that saw the last movement counting as progress itself).
    @Test func aClientThatStopsReadingIsIdleATimeoutAfterTheBytesLastMoved() throws {
        let held = Held()
        let (channel, events) = try Self.watched(timeout: .milliseconds(800), held: held)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        // 1 MB written at once; the socket takes a part of it every 50 ms until 850 ms, then nothing.
        try channel.writeOutbound(ByteBuffer(repeating: 0x61, count: 1_000_000))
        held.bytes = 1_000_000
        for _ in 0..<17 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
            held.bytes -= 10_000
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(800))
        #expect(!events.seen.contains(.write), "the bytes moved until 850 ms: not idle before 1,650 ms")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(events.seen.contains(.write), "idle by 1,750 ms: 850 ms + the timeout + an eighth of it")
    }

    /// Found by a hostile review: a client reading a download steadily at 200 KB/s was cut at about 4 MB with
    /// `--idle-timeout 2s`, because the kernel, its 4 MiB send buffer full, takes more only once a third is free.
    /// What the client acknowledged is its progress while nothing leaves the channel.
    @Test func aClientThatReadsSlowlyWhileTheSocketTakesNothingIsNotIdle() throws {
        let held = Held()
        let (channel, events) = try Self.watched(timeout: .milliseconds(800), held: held)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.isWritable = false
        held.bytes = 2_000_000
        try channel.writeOutbound(ByteBuffer(repeating: 0x61, count: 3_000_000))
        // Nothing leaves the channel for 5 s; the client acknowledges 10 KB every 100 ms.
        for _ in 0..<50 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
            held.acknowledged += 10_000
        }
        #expect(!events.seen.contains(.write), "the client kept reading")
        // It stops: idle a timeout (and an eighth or two) later.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(700))
        #expect(!events.seen.contains(.write))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        #expect(events.seen.contains(.write), "idle once the client took nothing for the timeout")
    }

    /// A client that takes the first bytes of a big download and stops (the channel past its high-water mark at the
    /// flush): write-idle a timeout after those bytes left, not up to two (was: the first check, a timeout after the
    /// connection began, took the movement it saw for progress made then).
    @Test func aClientThatStallsAtOnceIsIdleATimeoutLater() throws {
        let held = Held()
        let (channel, events) = try Self.watched(timeout: .milliseconds(800), held: held)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        channel.isWritable = false
        held.bytes = 2_000_000
        try channel.writeOutbound(ByteBuffer(repeating: 0x61, count: 3_000_000))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(849))
        #expect(!events.seen.contains(.write), "the bytes left at 300 ms: not idle before 1,100 ms")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(151))
        #expect(events.seen.contains(.write), "idle by 1,300 ms: 300 ms + the timeout + two eighths of it")
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
