import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import ProxyServer
import Testing

/// `PipeliningGate` on an `EmbeddedChannel`, request parts in and response parts out by hand: a pipelined request
/// waits for the response before it, reading stops only once something waits (or after a CONNECT), and graceful
/// shutdown closes at the right moment.
struct PipeliningGateTests {
    /// Counts the `read` calls that get through to the channel.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = NIOAny
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    /// What the gate delivers, in order.
    final class Delivered: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        var parts: [String] = []
        var errors = 0
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): parts.append("head \(head.method) \(head.uri)")
            case .body(let body): parts.append("body \(body.readableBytes)")
            case .end: parts.append("end")
            }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors += 1 }
    }

    struct Setup {
        let channel: EmbeddedChannel
        let counter = ReadCounter()
        let delivered = Delivered()
        let gate = PipeliningGate()

        init() throws {
            channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandlers([counter, gate, delivered])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
            channel.pipeline.read()  // the read a channel makes when it becomes active
            counter.reads = 1
        }

        func request(_ uri: String, method: HTTPMethod = .GET, headers: HTTPHeaders = [:], end: Bool = true) throws {
            try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: uri,
                                                                                headers: headers)))
            if end { try channel.writeInbound(HTTPServerRequestPart.end(nil)) }
        }

        func respond(_ headers: HTTPHeaders = [:]) throws -> HTTPResponseHead {
            try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
            guard case .head(let head) = try channel.readOutbound(as: HTTPServerResponsePart.self) else {
                Issue.record("no response head written")
                return HTTPResponseHead(version: .http1_1, status: .ok)
            }
            _ = try channel.readOutbound(as: HTTPServerResponsePart.self)
            return head
        }

        /// The reads that got through, after asking for one more.
        func readsAfterAskingOnce() -> Int {
            channel.pipeline.read()
            return counter.reads
        }
    }

    @Test func aClientThatDoesNotPipelineIsReadWhileItsResponseIsDue() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("/a")
        #expect(setup.gate.phase == .responsePending)
        #expect(setup.readsAfterAskingOnce() == 2, "nothing waits: reading goes on")
        _ = try setup.respond()
        #expect(setup.gate.phase == .idle)
        try setup.request("/b")
        #expect(setup.delivered.parts == ["head GET /a", "end", "head GET /b", "end"])
    }

    @Test func aPipelinedRequestWaitsForTheResponseBeforeIt() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("/a")
        try setup.request("/b", method: .POST, end: false)
        try setup.channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "xyz")))
        try setup.channel.writeInbound(HTTPServerRequestPart.end(nil))
        try setup.request("/c")
        #expect(setup.delivered.parts == ["head GET /a", "end"])
        #expect(setup.readsAfterAskingOnce() == 1, "something waits: the read is held")
        _ = try setup.respond()
        #expect(setup.delivered.parts == ["head GET /a", "end", "head POST /b", "body 3", "end"],
                "the next request, whole, and not the one after it")
        #expect(setup.counter.reads == 1, "/c still waits")
        _ = try setup.respond()
        #expect(setup.delivered.parts.suffix(2) == ["head GET /c", "end"])
        #expect(setup.counter.reads == 2, "nothing waits any more: the held read goes out")
    }

    /// A read that brings bytes the decoder makes no part of (the start of a pipelined head, or blank lines it
    /// drops) while a response is due stops reading until that response ends: a client streaming `\r\n` is not read
    /// on at full speed (found in review: a core's worth of CPU for as long as it lasted).
    @Test func aReadThatBringsNoPartWhileAResponseIsDueStopsReading() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("/a")  // (each part in a read of its own: `writeInbound` completes the read)
        #expect(setup.readsAfterAskingOnce() == 2)
        setup.channel.pipeline.fireChannelReadComplete()  // a read the decoder made nothing of
        #expect(setup.readsAfterAskingOnce() == 2, "held")
        _ = try setup.respond()
        #expect(setup.counter.reads == 3, "released when the response ends")
        try setup.request("/b")
        #expect(setup.readsAfterAskingOnce() == 4, "a new response due, nothing held yet")
    }

    @Test func aParserErrorBehindAPendingResponseComesAfterIt() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("/a")
        setup.channel.pipeline.fireErrorCaught(HTTPParserError.invalidMethod)
        #expect(setup.delivered.errors == 0)
        _ = try setup.respond()
        #expect(setup.delivered.errors == 1)
        #expect(setup.gate.phase == .responsePending, "the error's answer is the response now due")
    }

    @Test func afterAConnectNothingIsReadUntilItsResponse() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("example.com:443", method: .CONNECT)
        #expect(setup.readsAfterAskingOnce() == 1, "the decoder stopped: bytes would pile up in it")
        try setup.channel.pipeline.syncOperations.removeHandler(setup.gate).wait()
        #expect(setup.counter.reads == 2, "the owed read goes out when the gate leaves")
    }

    @Test func anUpgradeRequestAlsoStopsReadingWhileItsResponseIsDue() throws {
        let setup = try Setup()
        defer { _ = try? setup.channel.finish(acceptAlreadyClosed: true) }
        try setup.request("/chat", headers: ["Upgrade": "websocket", "Connection": "upgrade"])
        #expect(setup.readsAfterAskingOnce() == 1)
    }

    @Test func shutdownClosesAnIdleConnectionAtOnce() throws {
        let setup = try Setup()
        try setup.request("/a")
        _ = try setup.respond()
        setup.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(!setup.channel.isActive)
    }

    @Test func shutdownDuringAResponseClosesAfterIt() throws {
        let setup = try Setup()
        try setup.request("/a")
        try setup.request("/b")
        setup.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(setup.channel.isActive)
        let head = try setup.respond(["Connection": "keep-alive"])
        #expect(head.headers["connection"] == ["close"])
        setup.channel.embeddedEventLoop.run()
        #expect(!setup.channel.isActive)
        #expect(setup.delivered.parts == ["head GET /a", "end"], "the waiting request is dropped")
    }

    @Test func shutdownWhileARequestIsArrivingClosesAfterItAndItsResponse() throws {
        let setup = try Setup()
        try setup.request("/upload", method: .POST, end: false)
        setup.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        try setup.channel.writeInbound(HTTPServerRequestPart.end(nil))
        #expect(setup.channel.isActive)
        _ = try setup.respond()
        setup.channel.embeddedEventLoop.run()
        #expect(!setup.channel.isActive)
    }

    @Test func shutdownAfterAnEarlyAnswerClosesWhenTheRequestEnds() throws {
        let setup = try Setup()
        try setup.request("/upload", method: .POST, end: false)
        _ = try setup.respond()
        #expect(setup.gate.phase == .requestPending)
        setup.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        try setup.channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "rest")))
        #expect(setup.channel.isActive)
        try setup.channel.writeInbound(HTTPServerRequestPart.end(nil))
        #expect(!setup.channel.isActive)
        #expect(setup.delivered.parts == ["head POST /upload", "body 4", "end"])
    }
}
