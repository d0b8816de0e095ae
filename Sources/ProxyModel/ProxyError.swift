/// A failure a user sees: the status the client gets and a message naming what failed, where, and why. Every answer
/// hookproxy gives in its own name (400, 407, 421, 431, 502, 503, 504, 508, 500) is made from one of these.
/// The message is the client's response body and the log's reason, e.g.
/// `hookproxy: connection refused 127.0.0.1:9: Failed to connect to 127.0.0.1 port 9: Connection refused`.
public struct ProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure; each fixes the status the client gets.
    public enum Kind: String, Sendable, Hashable {
        case badRequest, misdirected, headersTooLarge, proxyAuthRequired, tooManyConnections, loopDetected
        case connectFailed, dnsFailed, timeout, tlsFailed, upstreamFailed, upstreamClosed
        case trustRejected, challengeCancelled, redirectBlocked, redirectLimit, bodyTooLarge, internalError
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var status: Int {
        switch kind {
        case .badRequest: 400
        case .misdirected: 421
        case .headersTooLarge: 431
        case .proxyAuthRequired: 407
        case .tooManyConnections: 503
        case .timeout: 504
        case .internalError: 500
        case .loopDetected: 508
        case .connectFailed, .dnsFailed, .tlsFailed, .upstreamFailed, .upstreamClosed, .trustRejected,
            .challengeCancelled, .redirectBlocked, .redirectLimit, .bodyTooLarge:
            502
        }
    }

    public var description: String { message }

    /// The body the client receives: the message and a newline.
    public var responseBody: String { message + "\n" }
}
