import NIOWebSocket

/// The close reasons of frames NIO's decoder refuses. Pure.
enum FrameErrorText {
    /// What a frame NIO's decoder refused was, in words a user can act on (NIO's own read `invalidFrameLength`).
    static func describe(_ error: any Error, maxFrameSize: Int) -> String {
        switch error as? NIOWebSocketError {
        case .invalidFrameLength?:
            return "a frame over \(maxFrameSize / (1024 * 1024)) MiB, hookproxy's limit for one frame (a larger message must come in fragments)"
        case .fragmentedControlFrame?:
            return "a control frame (close, ping, pong) without FIN: control frames cannot be fragmented"
        case .multiByteControlFrameLength?:
            return "a control frame (close, ping, pong) over 125 bytes"
        case nil:
            return "\(error)"
        }
    }
}
