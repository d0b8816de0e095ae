import FoundationEssentials

/// What the log knows about an upgraded connection (a WebSocket session, or another protocol the server accepted
/// with 101): its messages up to the capture limit, complete counts and sizes, and how it closed. Built on the
/// client connection's event loop; immutable once handed to a `FlowRecord`.
public struct WebSocketLog: Sendable, Hashable {
    /// `send`: client to server; `receive`: server to client (Chromium's words).
    public enum Direction: String, Sendable, Hashable {
        case send, receive
    }

    /// One data message (text or binary), after permessage-deflate was undone; `data` is cut at the capture limit.
    public struct Message: Sendable, Hashable {
        public var direction: Direction
        public var time: Date
        /// 1 text, 2 binary.
        public var opcode: Int
        public var size: Int
        public var data: [UInt8]
        public var truncated: Bool

        public init(direction: Direction, time: Date, opcode: Int, size: Int, data: [UInt8], truncated: Bool = false) {
            self.direction = direction
            self.time = time
            self.opcode = opcode
            self.size = size
            self.data = data
            self.truncated = truncated
        }
    }

    /// How the session ended: the close frame's code and reason (nil code: none was sent, the peer vanished), and
    /// which side ended it.
    public struct Close: Sendable, Hashable {
        public enum Side: String, Sendable, Hashable { case client, server }
        public var code: Int?
        public var reason: String
        public var by: Side

        public init(code: Int?, reason: String, by: Side) {
            self.code = code
            self.reason = reason
            self.by = by
        }
    }

    /// `websocket`, or the `Upgrade` token of another protocol (relayed as bytes, no messages).
    public var protocolName: String
    /// True on the record written when the 101 went out (the console's first line); the files get only the
    /// record written at the end.
    public var isOpening: Bool
    public var messages: [Message]
    public var close: Close?
    public var sentMessages = 0
    public var sentBytes = 0
    public var receivedMessages = 0
    public var receivedBytes = 0

    public init(protocolName: String = "websocket", isOpening: Bool = false, messages: [Message] = [], close: Close? = nil) {
        self.protocolName = protocolName
        self.isOpening = isOpening
        self.messages = messages
        self.close = close
    }

    public var isWebSocket: Bool { protocolName == "websocket" }
}
