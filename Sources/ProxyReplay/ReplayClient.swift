import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyModel

/// Sends one request to a hookproxy listener in absolute form (`GET https://host/path HTTP/1.1`) on a connection
/// of its own, and reads the whole answer.
///
/// Absolute form carries `https` URLs too: the proxy fetches them itself (TLS upstream through libcurl, `trust`
/// rules included), so every rule and hook applies to them as to `http` ones, and no CONNECT tunnel or
/// interception certificate is involved.
public struct ReplayClient: Sendable {
    public var host: String
    public var port: Int
    /// The longest one request may take, connection to the response's end.
    public var timeout: Duration
    public var group: any EventLoopGroup

    public init(host: String, port: Int, timeout: Duration = .seconds(60),
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.host = host
        self.port = port
        self.timeout = timeout
        self.group = group
    }

    public func send(_ entry: ReplayEntry) async -> ReplayResponse {
        guard let url = ProxyURL(string: entry.url) else {
            return ReplayResponse(status: 0, size: 0, failure: "not a valid http(s) URL")
        }
        // `OPTIONS *` was logged with an empty path (RFC 9112 §3.2.4): sent so, the proxy forwards it as `*` again.
        let asterisk = entry.method == "OPTIONS" && url.path == "/" && url.query == nil && ProxyURL.hasEmptyPath(entry.url)
        let target = asterisk ? "\(url.scheme)://\(url.authority)" : url.description
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: entry.method), uri: target)
        head.headers.add(name: "Host", value: url.authority)
        for field in entry.headers { head.headers.add(name: field.name, value: field.value) }
        head.headers.add(name: "Connection", value: "close")
        let request = ReplayRequestParts(head: head, body: entry.body)

        let loop = group.next()
        let promise = loop.makePromise(of: ReplayResponse.self)
        let timeout = TimeAmount.nanoseconds(Int64(self.timeout.components.seconds) * 1_000_000_000
                                             + self.timeout.components.attoseconds / 1_000_000_000)
        let connect = ClientBootstrap(group: loop)
            .connectTimeout(min(timeout, .seconds(10)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(
                        ReplayResponseReader(request: request, promise: promise, timeout: timeout))
                }
            }
            .connect(host: host, port: port)
        connect.whenFailure { error in
            promise.succeed(ReplayResponse(status: 0, size: 0, failure: "cannot connect to the replay proxy: \(error)"))
        }
        let response = (try? await promise.futureResult.get()) ?? ReplayResponse(status: 0, size: 0, failure: "no response")
        if let channel = try? await connect.get() { try? await channel.close() }
        return response
    }
}

/// The request's head and body, handed to the connection's handler.
struct ReplayRequestParts: Sendable {
    var head: HTTPRequestHead
    var body: [UInt8]
}

/// Writes the request once connected, counts the response body, and completes the promise exactly once: at the
/// response's end, when the connection ends early, or when the time is up.
final class ReplayResponseReader: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: ReplayRequestParts
    private let promise: EventLoopPromise<ReplayResponse>
    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var done = false
    private var status = 0
    private var size = 0
    private var isText = false
    /// The start of the body, kept to read hookproxy's own error answers.
    private var bodyStart: [UInt8] = []

    init(request: ReplayRequestParts, promise: EventLoopPromise<ReplayResponse>, timeout: TimeAmount) {
        self.request = request
        self.promise = promise
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        let milliseconds = timeout.nanoseconds / 1_000_000
        let shown = milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
        let channel = context.channel
        let reader = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            reader.value.finish(failure: "no complete response within \(shown)")
            channel.close(promise: nil)
        }
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        if !request.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: request.body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            isText = head.headers.first(name: "content-type")?.hasPrefix("text/plain") ?? false
        case .body(let buffer):
            size += buffer.readableBytes
            if bodyStart.count < 1024 { bodyStart += buffer.readableBytesView.prefix(1024 - bodyStart.count) }
        case .end:
            finish(failure: ownError)
            context.close(promise: nil)
        }
    }

    /// hookproxy answers in its own name with a text body `hookproxy: <what> <host>: <reason>` (400, 502, 504, …).
    private var ownError: String? {
        guard status >= 400, isText else { return nil }
        let text = String(decoding: bodyStart, as: UTF8.self)
        guard text.hasPrefix("hookproxy: ") else { return nil }
        return String(text.prefix { $0 != "\n" })
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(failure: status == 0 ? "the replay proxy closed the connection without a response"
                                    : "the connection closed before the response's end (\(size) bytes arrived)")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(failure: "\(error)")
        context.close(promise: nil)
    }

    private func finish(failure: String?) {
        guard !done else { return }
        done = true
        deadline?.cancel()
        promise.succeed(ReplayResponse(status: status, size: size, failure: failure))
    }
}
