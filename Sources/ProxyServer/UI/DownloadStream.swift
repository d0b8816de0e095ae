import NIOCore
import NIOHTTP1
import ProxyUI

/// One `GET /api/har` answer written a part at a time. A part is made on `ViewerGate.queue` (off the event loops,
/// one part of one download at a time), written here, and the next is asked for only once the channel is writable
/// again. A client that stops reading holds the part in flight and what the socket buffers take, never the whole
/// file (hundreds of MB when the store is full), until the idle timeout closes its connection; N such clients hold
/// N parts, not N files.
///
/// Event-loop bound (the client connection's loop); the handler ends the response when `finished` is called.
final class DownloadStream {
    private enum State {
        /// The channel is not writable: the next part is asked for once it is (`writable`).
        case waiting(FlowDownload)
        /// A part is being made on the queue.
        case making
        /// The last part was written, or the client left.
        case ended
    }

    private weak var handler: ProxyRequestHandler?
    private let eventLoop: any EventLoop
    private var state = State.ended

    init(handler: ProxyRequestHandler, eventLoop: any EventLoop) {
        self.handler = handler
        self.eventLoop = eventLoop
    }

    /// Writes the head and asks for the first part.
    func start(head: HTTPResponseHead, download: FlowDownload) {
        handler?.send(.head(head))
        make(download)
    }

    /// The channel became writable: the next part, if one was waiting for it.
    func writable() {
        guard case .waiting(let download) = state else { return }
        make(download)
    }

    /// The client left: parts made from now on are dropped, and no more are asked for.
    func stop() {
        state = .ended
    }

    private func make(_ download: FlowDownload) {
        state = .making
        let loop = eventLoop
        let stream = NIOLoopBound(self, eventLoop: loop)
        ViewerGate.queue.async {
            var download = download
            let part = download.next()
            let after = download
            loop.execute { stream.value.arrived(part, after) }
        }
    }

    private func arrived(_ part: [UInt8]?, _ download: FlowDownload) {
        guard case .making = state, let handler else { return }
        if let part, !part.isEmpty {
            handler.send(.body(.byteBuffer(ByteBuffer(bytes: part))))
            handler.flush()
        }
        if download.isFinished {
            state = .ended
            handler.downloadFinished()
        } else if handler.isWritable {
            make(download)
        } else {
            state = .waiting(download)
        }
    }
}

@available(*, unavailable)
extension DownloadStream: Sendable {}
