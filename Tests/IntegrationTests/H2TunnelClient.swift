import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import ProxyTestSupport
import X509

// An HTTP/2 client through hookproxy for the issue-16 tests, written with swift-nio-http2 at the frame level (so a
// test sees trailers, resets and flow control as they are): CONNECT on a raw socket, TLS offering the given ALPN
// protocols and trusting only the given roots, then one child channel per request stream. Every wait is bounded.

/// One response as an HTTP/2 stream delivered it.
struct H2Response: Sendable {
    var status: Int = 0
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var trailers: [(name: String, value: String)]?
    /// The error code of an RST_STREAM that ended the stream (nil when it ended cleanly).
    var reset: HTTP2ErrorCode?
    var failure: String?

    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers.first { $0.name == name.lowercased() }?.value }
    func trailer(_ name: String) -> String? { trailers?.first { $0.name == name.lowercased() }?.value }
}

/// A tunnel through hookproxy speaking HTTP/2 (when the server picks it). Not Sendable-checked: its channels are
/// used through their own event loop.
final class H2TunnelClient: @unchecked Sendable {
    let channel: any Channel
    let negotiatedProtocol: String?
    let peer: NIOSSLCertificate?
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    let authority: String
    /// The error code of the server's GOAWAY; fails when the connection closes without one.
    let goAway: EventLoopFuture<HTTP2ErrorCode>

    private init(channel: any Channel, negotiated: String?, peer: NIOSSLCertificate?,
                 multiplexer: NIOHTTP2Handler.StreamMultiplexer?, authority: String, goAway: EventLoopFuture<HTTP2ErrorCode>) {
        self.goAway = goAway
        self.channel = channel
        self.negotiatedProtocol = negotiated
        self.peer = peer
        self.multiplexer = multiplexer
        self.authority = authority
    }

    /// `CONNECT host:port` through the proxy, then TLS offering `alpn`; HTTP/2 is set up when the server chose `h2`.
    /// `tunnel: false` skips the CONNECT: TLS straight to `proxyPort` (a TLS `--reverse` listener), `host` as SNI.
    static func connect(proxyPort: Int, host: String = "localhost", port: Int, trustRoots: [Certificate],
                        alpn: [String] = ["h2"], tunnel: Bool = true) async throws -> H2TunnelClient {
        let reader = tunnel ? ConnectAnswerReader() : nil
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { if let reader { try channel.pipeline.syncOperations.addHandler(reader) } }
            }
            .connect(host: "127.0.0.1", port: proxyPort).get()
        do {
            let authority = "\(host):\(port)"
            if let reader {
                try await channel.writeAndFlush(ByteBuffer(string: "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n")).get()
                let answer = try await withTimeout(channel, reader.answer.futureResult)
                guard answer.hasPrefix("HTTP/1.1 200") else { throw TestSupportError("CONNECT refused: \(answer)") }
            }

            let roots = try trustRoots.map { try NIOSSLCertificate(bytes: try $0.serializeAsPEM().derBytes, format: .der) }
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .certificates(roots)
            configuration.applicationProtocols = alpn
            let context = try NIOSSLContext(configuration: configuration)
            let goAway = channel.eventLoop.makePromise(of: HTTP2ErrorCode.self)
            channel.closeFuture.whenComplete { _ in goAway.fail(TestSupportError("closed without GOAWAY")) }
            let ready = channel.eventLoop.makePromise(of: Negotiated.self)
            try await channel.eventLoop.submit {
                let pipeline = channel.pipeline.syncOperations
                try pipeline.addHandler(NIOSSLClientHandler(context: context, serverHostname: host))
                // HTTP/2 is set up inside the handshake-completed event, before the server's SETTINGS are read.
                try pipeline.addHandler(HandshakeWatcher(ready, goAway: goAway))
            }.get()
            let negotiated = try await withTimeout(channel, ready.futureResult)
            let chosen = negotiated.chosen
            let multiplexer = negotiated.multiplexer
            let peer = try await channel.nioSSL_peerCertificate().get()
            return H2TunnelClient(channel: channel, negotiated: chosen, peer: peer, multiplexer: multiplexer,
                                  authority: authority, goAway: goAway.futureResult)
        } catch {
            try? await channel.close()
            throw error
        }
    }

    /// Opens a stream and sends `method path` with `headers`, `body` (in one DATA frame) and `trailers`.
    /// `autoRead: false` leaves the stream unread (its window fills) until `StreamCollector.startReading`.
    func open(_ method: String = "GET", _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
              trailers: [(String, String)]? = nil, autoRead: Bool = true) async throws -> StreamCollector {
        guard let multiplexer else { throw TestSupportError("no HTTP/2 on this tunnel (ALPN: \(negotiatedProtocol ?? "none"))") }
        let collector = StreamCollector(eventLoop: channel.eventLoop)
        let stream = try await multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.syncOptions!.setOption(ChannelOptions.autoRead, value: autoRead)
                try stream.pipeline.syncOperations.addHandler(collector)
            }
        }.get()
        var head = HPACKHeaders([(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)])
        head.add(contentsOf: headers.map { ($0.0.lowercased(), $0.1) })
        let endAfterHead = body == nil && trailers == nil
        stream.write(HTTP2Frame.FramePayload.headers(.init(headers: head, endStream: endAfterHead)), promise: nil)
        if let body {
            stream.write(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(bytes: body)),
                                                            endStream: trailers == nil)), promise: nil)
        }
        if let trailers {
            stream.write(HTTP2Frame.FramePayload.headers(.init(headers: HPACKHeaders(trailers), endStream: true)),
                         promise: nil)
        }
        stream.flush()
        collector.stream = stream
        return collector
    }

    /// A stream whose HEADERS block is exactly `headers` (pseudo-headers included, none added).
    func openRaw(_ headers: [(String, String)], endStream: Bool = true) async throws -> StreamCollector {
        guard let multiplexer else { throw TestSupportError("no HTTP/2 on this tunnel") }
        let collector = StreamCollector(eventLoop: channel.eventLoop)
        let stream = try await multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture { try stream.pipeline.syncOperations.addHandler(collector) }
        }.get()
        stream.writeAndFlush(HTTP2Frame.FramePayload.headers(.init(headers: HPACKHeaders(headers), endStream: endStream)), promise: nil)
        collector.stream = stream
        return collector
    }

    /// One request, waited for (bounded).
    func send(_ method: String = "GET", _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
              trailers: [(String, String)]? = nil, timeout: TimeAmount = .seconds(20)) async throws -> H2Response {
        let collector = try await open(method, path, headers: headers, body: body, trailers: trailers)
        return try await collector.response(timeout: timeout)
    }

    /// Writes `bytes` below the HTTP/2 handler, as frames the client's own NIO would refuse to send.
    func sendRawBytes(_ bytes: [UInt8]) async throws {
        let context = try await channel.pipeline.context(handlerType: NIOHTTP2Handler.self).get()
        try await channel.eventLoop.submit {
            context.writeAndFlush(NIOAny(ByteBuffer(bytes: bytes)), promise: nil)
        }.get()
    }

    func close() async {
        try? await channel.close()
    }
}

/// Collects one stream's frames. Event-loop bound.
final class StreamCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame.FramePayload

    private var result = H2Response()
    private let done: EventLoopPromise<H2Response>
    private let firstBytes: EventLoopPromise<Void>
    var stream: (any Channel)?

    init(eventLoop: any EventLoop) {
        done = eventLoop.makePromise()
        firstBytes = eventLoop.makePromise()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            let fields = headers.headers.map { (name: $0.name, value: $0.value) }
            if let status = fields.first(where: { $0.name == ":status" }), result.status == 0 || result.status < 200 {
                result.status = Int(status.value) ?? 0
                result.headers = fields.filter { !$0.name.hasPrefix(":") }
                if result.status >= 200 { firstBytes.succeed(()) }
            } else {
                result.trailers = fields
            }
            if headers.endStream { done.succeed(result) }
        case .data(let data):
            if case .byteBuffer(var buffer) = data.data { result.body += buffer.readBytes(length: buffer.readableBytes) ?? [] }
            if data.endStream { done.succeed(result) }
        case .rstStream(let code):
            result.reset = code
            done.succeed(result)
            firstBytes.succeed(())  // (a stream reset before its head: no head will come)
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let reset = error as? NIOHTTP2Errors.StreamClosed { result.reset = reset.errorCode }
        result.failure = "\(error)"
        done.succeed(result)
        firstBytes.succeed(())
    }

    func channelInactive(context: ChannelHandlerContext) {
        if result.failure == nil && result.reset == nil { result.failure = result.failure ?? "stream closed" }
        done.succeed(result)
        firstBytes.succeed(())
        context.fireChannelInactive()
    }

    /// Completes when the response head has arrived (or the stream ended).
    func head(timeout: TimeAmount = .seconds(20)) async throws {
        try await withTimeout(stream!, firstBytes.futureResult, timeout)
    }

    func response(timeout: TimeAmount = .seconds(20)) async throws -> H2Response {
        try await withTimeout(stream!, done.futureResult, timeout)
    }

    /// Bytes of body received so far.
    func bodyCount() async throws -> Int {
        try await stream!.eventLoop.submit { self.result.body.count }.get()
    }

    /// Turns reading on for a stream opened with `autoRead: false`.
    func startReading() {
        guard let stream else { return }
        stream.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in stream.read() }
    }

    /// Resets the stream (RST_STREAM CANCEL), as a client abandoning a request does.
    func reset() {
        stream?.close(promise: nil)
    }
}

/// Reports the server's GOAWAY (frames of stream 0 reach the connection's pipeline). Event-loop bound.
private final class GoAwayWatcher: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    private let goAway: EventLoopPromise<HTTP2ErrorCode>
    init(_ goAway: EventLoopPromise<HTTP2ErrorCode>) { self.goAway = goAway }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway(_, let code, _) = unwrapInboundIn(data).payload { goAway.succeed(code) }
        context.fireChannelRead(data)
    }
}

/// Reads the proxy's answer to CONNECT, up to the blank line, then passes every later byte on: it stays first in
/// the pipeline, ahead of TLS, which must see the server's handshake (it used to swallow it, so the handshake
/// never completed and the proxy gave up on the client). Event-loop bound.
private final class ConnectAnswerReader: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private var bytes: [UInt8] = []
    private var answered = false
    let answer = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: String.self)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return context.fireChannelRead(data) }
        var buffer = unwrapInboundIn(data)
        bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
        let text = String(decoding: bytes, as: UTF8.self)
        if text.contains("\r\n\r\n") {
            answered = true
            answer.succeed(text)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer.fail(TestSupportError("the proxy closed the connection before answering CONNECT"))
    }
}

/// What the handshake chose, and HTTP/2's stream multiplexer when it chose h2.
private struct Negotiated: @unchecked Sendable {
    var chosen: String?
    var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
}

/// On the TLS handshake's completion, sets up HTTP/2 when the server chose h2 (at once, inside the event, so the
/// server's first frames meet it) and reports what was chosen; fails the promise when the handshake fails or the
/// connection closes first. Event-loop bound.
private final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = NIOAny
    private let negotiated: EventLoopPromise<Negotiated>
    private let goAway: EventLoopPromise<HTTP2ErrorCode>
    init(_ negotiated: EventLoopPromise<Negotiated>, goAway: EventLoopPromise<HTTP2ErrorCode>) {
        self.negotiated = negotiated
        self.goAway = goAway
    }

    /// What the server sent after the handshake, held until HTTP/2 is set up to read it (its SETTINGS).
    private var held: [NIOAny]?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if held != nil { held!.append(data) } else { context.fireChannelRead(data) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        guard case .handshakeCompleted(let chosen) = event as? TLSUserEvent else { return }
        held = []
        // Not inside TLS's own callback: HTTP/2's preface, written from there, would not go out.
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (watcher, context) = bound.value
            watcher.setUp(context: context, chosen: chosen)
        }
    }

    private func setUp(context: ChannelHandlerContext, chosen: String?) {
        do {
            var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
            if chosen == "h2" {
                // A connection window well above a stream's: a stream the test leaves unread must not use it up.
                var connection = NIOHTTP2Handler.ConnectionConfiguration()
                connection.targetWindowSize = 16 << 20
                // A test client may break a stream's framing (DATA past its content-length) or its header block
                // (an upper-case name, a missing :path) on purpose.
                connection.contentLengthValidation = .disabled
                connection.headerBlockValidation = .disabled
                multiplexer = try context.pipeline.syncOperations.configureHTTP2Pipeline(
                    mode: .client, connectionConfiguration: connection, streamConfiguration: .init()
                ) { stream in stream.eventLoop.makeSucceededVoidFuture() }
                try context.pipeline.syncOperations.addHandler(GoAwayWatcher(goAway))
            }
            let replay = held ?? []
            held = nil
            for data in replay { context.fireChannelRead(data) }
            if !replay.isEmpty { context.fireChannelReadComplete() }
            context.channel.flush()
            negotiated.succeed(Negotiated(chosen: chosen, multiplexer: multiplexer))
        } catch {
            negotiated.fail(error)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        negotiated.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        negotiated.fail(TestSupportError("the connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }
}

/// Waits for `future`, closing `channel` and failing the wait when `timeout` passes first (a channel already
/// closed when the deadline comes would otherwise leave the wait unbounded).
func withTimeout<T: Sendable>(_ channel: any Channel, _ future: EventLoopFuture<T>,
                              _ timeout: TimeAmount = .seconds(20)) async throws -> T {
    let bounded = channel.eventLoop.makePromise(of: T.self)
    future.cascade(to: bounded)
    let deadline = channel.eventLoop.scheduleTask(in: timeout) {
        channel.close(promise: nil)
        bounded.fail(TestSupportError("no answer within \(timeout)"))
    }
    defer { deadline.cancel() }
    return try await bounded.futureResult.get()
}
