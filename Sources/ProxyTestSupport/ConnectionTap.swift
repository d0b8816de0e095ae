import NIOCore
import NIOSSL
import NIOTLS

/// First application-level handler of every accepted connection (after TLS when the origin speaks TLS): counts the
/// bytes that arrive, finds the raw request heads, and notes TLS handshakes and the connection's end.
/// Event-loop thread only.
final class ConnectionTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let id: Int
    private let recorder: OriginRecorder
    var scanner = RawHeadScanner()

    init(id: Int, recorder: OriginRecorder) {
        self.id = id
        self.recorder = recorder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if buffer.readableBytes > 0 {
            recorder.update(id) { $0.bytesReceived += buffer.readableBytes }
            buffer.withUnsafeReadableBytes { scanner.feed($0) }
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            let peer = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate
            recorder.update(id) {
                $0.tlsHandshakeCompleted = true
                $0.clientCertificatePresented = peer != nil
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        recorder.closed(id)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures and resets are expected in tests; the connection just ends.
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ConnectionTap: Sendable {}
