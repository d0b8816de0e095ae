import NIOCore
import NIOHTTP1

/// What an `Exchange` may ask of the client connection it serves — the whole contract between the two, all on the
/// connection's event loop.
///
/// Order: the handler creates the exchange and calls `start`, then feeds it the request (`receiveRequestBody`,
/// `finishRequestBody`), writability (`drainResponse`) and the client's end (`clientClosed`, `clientTimedOut`).
/// The exchange writes with `send` and `flush`, steers reading with `pauseReading`/`resumeReading`, and ends its
/// use of the connection exactly once: `exchangeFinished` (the connection is reused or closed by the handler) or
/// `closeConnection` (a response cut short). After either, or after `clientClosed`, it calls nothing more.
protocol ExchangeClient: AnyObject {
    /// Whether the channel takes more writes now (else the exchange waits for `drainResponse`).
    var isWritable: Bool { get }
    /// Writes a response part without flushing.
    func send(_ part: HTTPServerResponsePart)
    func flush()
    /// Writes and flushes the response's end before the request was read to its end (an early answer).
    func sendEnd(trailers: HTTPHeaders?) -> EventLoopFuture<Void>
    /// Stops reading the request body until `resumeReading` (the upstream is behind).
    func pauseReading()
    func resumeReading()
    /// Closes once what was written is out, with no clean end: the client can tell the body is incomplete.
    func closeConnection()
    /// The response is complete and the request read: the connection goes idle (or closes, when `close`).
    /// `trailers` go with the response's end (nil: none).
    func exchangeFinished(_ exchange: Exchange, close: Bool, endAlreadySent: Bool, trailers: HTTPHeaders?)
}

extension ProxyRequestHandler: ExchangeClient {}
