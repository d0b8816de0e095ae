import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// An upstream that misbehaves on purpose, for the tests of what the proxy does with traffic no well-kept server
/// sends: it answers each request on a connection by playing one script of raw steps (bytes exactly as given,
/// pauses, a close, a reset), whatever the request was. Plain TCP on 127.0.0.1 (a free port), or TLS with `tls`.
///
/// It reads the request head (and, unless `answerEarly`, a Content-Length body) before playing the script; with
/// `answerEarly` the script starts as soon as the head is in, while the body may still be arriving (a server that
/// answers 413 to an upload). Every byte received is recorded.
///
/// Thread safety: every member may be used from any thread; handlers run on NIO's event loops and never block.
public final class MisbehavingOrigin: Sendable {
    /// One step of a script.
    public enum Step: Sendable {
        /// Writes these bytes exactly (no framing added).
        case send([UInt8])
        /// Waits this many milliseconds.
        case pause(milliseconds: Int64)
        /// Writes the bytes one at a time, `interval` apart.
        case drip([UInt8], intervalMilliseconds: Int64)
        /// Closes the connection (a FIN).
        case close
        /// Resets the connection (an RST: SO_LINGER 0, then close).
        case reset
        /// Closes the TCP connection (a FIN) without TLS's close_notify before it: a truncation an attacker (or a
        /// careless server) can make. Without TLS, the same as `close`.
        case closeWithoutTLSClose
        /// Keeps the connection open and silent until the client leaves or the origin shuts down.
        case hang

        /// `.send` of a string's UTF-8 bytes.
        public static func text(_ text: String) -> Step { .send(Array(text.utf8)) }
    }

    public let port: Int
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    public let baseURL: String
    private let serverChannel: any Channel
    private let state: RecordedState

    /// What every connection records, shared by the origin and its connections' handlers.
    final class RecordedState: Sendable {
        private let mutex = Mutex(Recorded())
        func withLock<T: Sendable>(_ body: (inout Recorded) -> T) -> T { mutex.withLock { body(&$0) } }
    }

    struct Recorded {
        var received: [UInt8] = []
        var connections = 0
        var open: [ObjectIdentifier: any Channel] = [:]
    }

    private init(port: Int, scheme: String, serverChannel: any Channel, state: RecordedState) {
        self.port = port
        self.baseURL = "\(scheme)://127.0.0.1:\(port)"
        self.serverChannel = serverChannel
        self.state = state
    }

    /// Binds 127.0.0.1:0 and plays `script` to every request. Call `shutdown()` when done.
    public static func start(_ script: [Step], answerEarly: Bool = false,
                             tls: TestTLSIdentity? = nil) async throws -> MisbehavingOrigin {
        let state = RecordedState()
        let sslContext = try tls.map { try $0.makeServerContext(clientCA: nil) }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    state.withLock {
                        $0.connections += 1
                        $0.open[ObjectIdentifier(channel)] = channel
                    }
                    channel.closeFuture.whenComplete { _ in
                        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(channel)) }
                    }
                    let sync = channel.pipeline.syncOperations
                    if let sslContext { try sync.addHandler(NIOSSLServerHandler(context: sslContext)) }
                    try sync.addHandler(ScriptPlayer(script: script, answerEarly: answerEarly, state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw TestSupportError("MisbehavingOrigin: bound channel has no port")
        }
        return MisbehavingOrigin(port: port, scheme: tls == nil ? "http" : "https", serverChannel: channel, state: state)
    }

    /// Starts an origin, runs `body` with it, and shuts it down whether `body` returns or throws.
    public static func with<T>(_ script: [Step], answerEarly: Bool = false, tls: TestTLSIdentity? = nil,
                               _ body: (MisbehavingOrigin) async throws -> T) async throws -> T {
        let origin = try await start(script, answerEarly: answerEarly, tls: tls)
        do {
            let result = try await body(origin)
            await origin.shutdown()
            return result
        } catch {
            await origin.shutdown()
            throw error
        }
    }

    /// Closes the listener and every connection still open.
    public func shutdown() async {
        try? await serverChannel.close()
        for channel in state.withLock({ Array($0.open.values) }) { channel.close(promise: nil) }
    }

    /// Every byte received so far, over all connections (after TLS decryption).
    public var received: [UInt8] { state.withLock { $0.received } }
    /// How many TCP connections were accepted.
    public var connections: Int { state.withLock { $0.connections } }
    /// How many accepted connections are still open (the client has not closed them).
    public var openConnections: Int { state.withLock { $0.open.count } }
}

/// Reads a request (head, and its Content-Length body unless answering early), then plays the script once.
/// Event-loop bound.
private final class ScriptPlayer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let script: [MisbehavingOrigin.Step]
    private let answerEarly: Bool
    private let state: MisbehavingOrigin.RecordedState
    private var pending: [UInt8] = []
    private var playing = false

    init(script: [MisbehavingOrigin.Step], answerEarly: Bool, state: MisbehavingOrigin.RecordedState) {
        self.script = script
        self.answerEarly = answerEarly
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(unwrapInboundIn(data).readableBytesView)
        state.withLock { $0.received += bytes }
        guard !playing else { return }
        pending += bytes
        guard let headEnd = pending.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { return }
        if !answerEarly {
            let head = String(decoding: pending[..<headEnd], as: UTF8.self).lowercased()
            let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            guard pending.count - headEnd >= length else { return }
        }
        playing = true
        play(script[...], context: context)
    }

    private func play(_ steps: ArraySlice<MisbehavingOrigin.Step>, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        guard let step = steps.first else {
            // played to the end with the connection open: the next request on it gets the script again
            playing = false
            pending = []
            return
        }
        let rest = steps.dropFirst()
        switch step {
        case .send(let bytes):
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes))).assumeIsolated().whenComplete { _ in
                self.play(rest, context: context)
            }
        case .pause(let ms):
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(ms)) { self.play(rest, context: context) }
        case .drip(let bytes, let interval):
            guard let first = bytes.first else { return play(rest, context: context) }
            let remaining = Array(bytes.dropFirst())
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: [first]))).assumeIsolated().whenComplete { _ in
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(interval)) {
                    self.play([.drip(remaining, intervalMilliseconds: interval)] + rest, context: context)
                }
            }
        case .close:
            context.close(promise: nil)
        case .reset:
            guard let socket = context.channel as? any SocketOptionProvider else { return context.close(promise: nil) }
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case .closeWithoutTLSClose:
            // Closed from the front of the pipeline, the TLS handler never sees the close (its writes went out).
            if (try? context.pipeline.syncOperations.addHandler(FrontCloser(), position: .first)) == nil {
                context.close(promise: nil)
            }
        case .hang:
            break
        }
    }
}

/// Closes its channel as it is added, from the front of the pipeline: no handler but the channel's own sees it.
private final class FrontCloser: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension FrontCloser: Sendable {}

@available(*, unavailable)
extension ScriptPlayer: Sendable {}
