import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// A real WebSocket server on 127.0.0.1 (a free port) for tests, on SwiftNIO's WebSocket upgrader; with `tls`, wss.
///
/// It echoes every data message (text or binary, put back together from its frames) and answers a ping with a pong
/// of the same data. Text commands: `close:CODE:REASON` — it sends that close frame and closes; `vanish` — it closes
/// the TCP connection without a close frame; `flood:COUNT:SIZE` — it sends COUNT binary messages of SIZE bytes, each
/// only while its socket takes more (`records.floodSent` counts them: a reader that stalls, stalls it). A client's
/// close frame is answered with the same code, then it closes.
/// Records each handshake's headers, the messages and bytes it received, and the close codes clients sent.
/// With `requiring`, a handshake without that credential gets 401 and a Basic or Digest challenge (realm `ws`).
///
/// Thread safety: every member may be used from any thread; handlers run on NIO's event loops.
public final class TestWebSocketServer: Sendable {
    /// What the server saw.
    public struct Records: Sendable {
        public var handshakes: [HTTPHeaders] = []
        public var messages = 0
        public var messageBytes = 0
        public var clientCloseCodes: [Int] = []
        /// TCP connections accepted (a pin mismatch must leave this 0... or at least no handshake).
        public var connections = 0
        /// Messages a `flood:` command has handed to the socket so far.
        public var floodSent = 0
    }

    public let port: Int
    private let channel: any Channel
    private let state: NIOLockedValueBox<Records>

    private init(port: Int, channel: any Channel, state: NIOLockedValueBox<Records>) {
        self.port = port
        self.channel = channel
        self.state = state
    }

    public var records: Records { state.withLockedValue { $0 } }

    /// A credential the server asks for: Basic, or Digest (MD5, qop auth).
    public struct Credential: Sendable {
        public var user: String
        public var password: String
        public var digest: Bool
        public init(user: String, password: String, digest: Bool = false) {
            self.user = user
            self.password = password
            self.digest = digest
        }

        func accepts(_ authorization: String?, target: String) -> Bool {
            guard let authorization else { return false }
            if digest {
                return DigestAnswer(authorization)?.verify(user: user, realm: "ws", password: password, method: "GET",
                                                           target: target) == true
            }
            return authorization == "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }

        var challenge: String {
            digest ? #"Digest realm="ws", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", qop="auth", algorithm=MD5, opaque="5ccc""#
                : #"Basic realm="ws""#
        }
    }

    /// With `clientCA` (and `tls`), the TLS handshake requires a client certificate that CA issued.
    public static func start(tls: TestTLSIdentity? = nil, clientCA: TestCertificate? = nil,
                             requiring credential: Credential? = nil) async throws -> TestWebSocketServer {
        let state = NIOLockedValueBox(Records())
        let sslContext = try tls.map { try $0.makeServerContext(clientCA: clientCA) }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                state.withLockedValue { $0.connections += 1 }
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: 16 * 1024 * 1024,
                    shouldUpgrade: { channel, head in
                        state.withLockedValue { $0.handshakes.append(head.headers) }
                        if let credential, !credential.accepts(head.headers.first(name: "authorization"), target: head.uri) {
                            return channel.eventLoop.makeSucceededFuture(nil)  // ChallengeResponder answers 401
                        }
                        return channel.eventLoop.makeSucceededFuture(HTTPHeaders([("X-Test-Server", "ws")]))
                    },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            // The refusing handler stays behind the upgrade's handlers otherwise, and would see frames.
                            if let responder = try? channel.pipeline.syncOperations.handler(type: ChallengeResponder.self) {
                                channel.pipeline.syncOperations.removeHandler(responder, promise: nil)
                            }
                            try channel.pipeline.syncOperations.addHandler(
                                NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 10_000,
                                                            maxAccumulatedFrameSize: 16 * 1024 * 1024))
                            try channel.pipeline.syncOperations.addHandler(EchoHandler(state: state))
                        }
                    })
                return channel.eventLoop.makeCompletedFuture {
                    if let sslContext { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                    if let credential { try channel.pipeline.syncOperations.addHandler(ChallengeResponder(challenge: credential.challenge)) }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw TestSupportError("TestWebSocketServer: no port") }
        return TestWebSocketServer(port: port, channel: channel, state: state)
    }

    public static func with<T>(tls: TestTLSIdentity? = nil, clientCA: TestCertificate? = nil,
                               requiring credential: Credential? = nil,
                               _ body: (TestWebSocketServer) async throws -> T) async throws -> T {
        let server = try await start(tls: tls, clientCA: clientCA, requiring: credential)
        do {
            let result = try await body(server)
            try? await server.channel.close()
            return result
        } catch {
            try? await server.channel.close()
            throw error
        }
    }
}

/// Answers a handshake the server refused (no credential, or a wrong one) with 401 and the challenge, then closes.
private final class ChallengeResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let challenge: String

    init(challenge: String) { self.challenge = challenge }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        let body = "credentials required\n"
        let head = HTTPResponseHead(version: .http1_1, status: .unauthorized, headers: HTTPHeaders([
            ("WWW-Authenticate", challenge), ("Content-Length", "\(body.utf8.count)"), ("Connection", "close"),
        ]))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }
}

/// Echoes messages, answers pings and closes; see `TestWebSocketServer`.
private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    let state: NIOLockedValueBox<TestWebSocketServer.Records>
    private var closing = false
    private var flood: (left: Int, size: Int)?

    init(state: NIOLockedValueBox<TestWebSocketServer.Records>) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let payload = frame.unmaskedData
        switch frame.opcode {
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: payload)), promise: nil)
        case .connectionClose:
            let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self).map(Int.init)
            state.withLockedValue { $0.clientCloseCodes.append(code ?? 1005) }
            guard !closing else {
                context.close(promise: nil)  // the client answered our close
                return
            }
            closing = true
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case .text, .binary:
            state.withLockedValue {
                $0.messages += 1
                $0.messageBytes += payload.readableBytes
            }
            if frame.opcode == .text, let text = payload.getString(at: payload.readerIndex, length: payload.readableBytes) {
                if text == "vanish" {
                    context.close(promise: nil)
                    return
                }
                if text.hasPrefix("flood:") {
                    let parts = text.split(separator: ":")
                    flood = (parts.count > 1 ? Int(parts[1]) ?? 0 : 0, parts.count > 2 ? Int(parts[2]) ?? 1024 : 1024)
                    continueFlood(context: context)
                    return
                }
                if text.hasPrefix("close:") {
                    let parts = text.split(separator: ":", maxSplits: 2)
                    var body = context.channel.allocator.buffer(capacity: 64)
                    body.writeInteger(UInt16(parts.count > 1 ? Int(parts[1]) ?? 1000 : 1000))
                    body.writeString(parts.count > 2 ? String(parts[2]) : "")
                    closing = true
                    context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: body)), promise: nil)
                    return
                }
            }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: frame.opcode, data: payload)), promise: nil)
        default:
            break
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { continueFlood(context: context) }
        context.fireChannelWritabilityChanged()
    }

    private func continueFlood(context: ChannelHandlerContext) {
        while let current = flood, current.left > 0, context.channel.isWritable {
            flood = (current.left - 1, current.size)
            let data = context.channel.allocator.buffer(repeating: 0x61, count: current.size)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: data)), promise: nil)
            state.withLockedValue { $0.floodSent += 1 }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
