import NIOWebSocket

/// RFC 6455's rules for one frame, beyond those NIO's decoder enforces (a frame's length, control frames fragmented
/// or over 125 bytes): a client masks every frame and a server none (§5.1), and a frame sets an RSV bit only where an
/// agreed extension defines it (§5.2). `permessage-deflate` defines RSV1, on a data message's first frame only
/// (RFC 7692 §6.1). A frame that breaks one of these makes the receiver fail the connection, so hookproxy, the
/// receiver of each side's frames, ends the session rather than hand such a frame on. Pure.
struct FrameRules: Equatable {
    /// What the server's 101 agreed in `Sec-WebSocket-Extensions`, as far as RSV bits go.
    enum Extensions: Equatable {
        /// No extension: every RSV bit must be clear.
        case none
        /// `permessage-deflate` alone: RSV1 may mark a message's first frame; RSV2 and RSV3 must be clear.
        case deflate
        /// An extension hookproxy does not know: its RSV bits mean what it says, and none is checked.
        case unknown
    }

    let extensions: Extensions

    /// The rules for a session whose 101 answered `Sec-WebSocket-Extensions` with `answer`.
    init(serverAnswer answer: [String]) {
        if !FrameSplitter.allowed(extensions: answer) {
            extensions = .unknown
        } else {
            extensions = DeflateAgreement(serverAnswer: answer) == nil ? .none : .deflate
        }
    }

    init(extensions: Extensions) {
        self.extensions = extensions
    }

    /// Why `frame` breaks a rule, in words for a close reason; nil when it breaks none. `fromClient`: the client sent
    /// it (else the server).
    func violation(_ frame: WebSocketFrame, fromClient: Bool) -> String? {
        if fromClient, frame.maskKey == nil {
            return "an unmasked frame (a client masks every frame, RFC 6455 §5.1)"
        }
        if !fromClient, frame.maskKey != nil {
            return "a masked frame (a server masks none, RFC 6455 §5.1)"
        }
        switch extensions {
        case .unknown:
            return nil
        case .none:
            guard frame.rsv1 || frame.rsv2 || frame.rsv3 else { return nil }
            return "an RSV bit set, with no extension agreed (RFC 6455 §5.2)"
        case .deflate:
            if frame.rsv2 || frame.rsv3 {
                return "RSV2 or RSV3 set (permessage-deflate defines RSV1 only)"
            }
            if frame.rsv1, frame.opcode != .text, frame.opcode != .binary {
                return "RSV1 on a control or continuation frame (permessage-deflate sets it on a message's first frame only, RFC 7692 §6.1)"
            }
            return nil
        }
    }
}
