import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A TLS server on 127.0.0.1 (a free port) that completes each handshake, then reads nothing until `release()`:
/// the client's writes back up (its TLS layer holds a record it could not send). After the release it keeps every
/// byte it decrypts, in order. Any thread.
public final class TestTLSSink: Sendable {
    public let port: Int
    private let listener: any Channel
    private let box: Box

    final class Box: Sendable {
        let state = Mutex(State())
    }

    struct State {
        var child: (any Channel)?
        var received: [UInt8] = []
        var closed = false
    }

    private init(port: Int, listener: any Channel, box: Box) {
        self.port = port
        self.listener = listener
        self.box = box
    }

    /// Binds 127.0.0.1:0 with `tls` on `group`. Call `shutdown()` when done.
    public static func start(tls: TestTLSIdentity, group: any EventLoopGroup) async throws -> TestTLSSink {
        let sslContext = try tls.makeServerContext(clientCA: nil)
        let box = Box()
        let listener = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    box.state.withLock { $0.child = channel }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(Keeper(box: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = listener.localAddress?.port else {
            try? await listener.close()
            throw TestSupportError("TestTLSSink: bound channel has no port")
        }
        return TestTLSSink(port: port, listener: listener, box: box)
    }

    /// Every byte received so far (after TLS).
    public var received: [UInt8] { box.state.withLock { $0.received } }
    /// Whether the connection closed.
    public var closed: Bool { box.state.withLock { $0.closed } }

    /// Reads from now on.
    public func release() async throws {
        guard let child = box.state.withLock({ $0.child }) else { return }
        try await child.setOption(.autoRead, value: true).get()
        child.read()
    }

    public func shutdown() async {
        try? await listener.close()
        if let child = box.state.withLock({ $0.child }) { try? await child.close() }
    }

    private final class Keeper: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let box: Box

        init(box: Box) { self.box = box }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent {
                try? context.channel.syncOptions?.setOption(.autoRead, value: false)
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            box.state.withLock { $0.received.append(contentsOf: bytes.readableBytesView) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.state.withLock { $0.closed = true }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
