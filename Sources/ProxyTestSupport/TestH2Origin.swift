import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOTLS
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTPS origin on 127.0.0.1:0 that speaks HTTP/2 (ALPN `h2`), written with swift-nio-http2 at the frame level,
/// for the HTTP/2 upstream tests. A client that does not pick `h2` gets HTTP/1.1 and, whatever it asks,
/// `hello over HTTP/1.1\n`. HTTP/2 routes (by path):
/// - `/hello`: 200, `hello over h2\n`.
/// - `/echo`: 200 with the request body; the request's trailers come back as response trailers.
/// - `/trailers`: 200, `body\n`, then trailers `x-checksum: 1234` and `grpc-status: 0`.
/// - `/drip`: 200, then `chunks` DATA frames (default 5) of `size` bytes every `interval_ms` (default 100).
/// - `/held?key=K`: answered once `release(K)` is called.
/// - `/bytes/N`: N bytes of `x`.
/// - `/stall`: recorded on its HEADERS, then never read (its stream's window stays shut once the first 64 KiB of
///   body are in) and never answered: a server applying backpressure to an upload.
/// It records every request (path, headers, the connection it came on), counts connections, and counts the held
/// requests whose stream ended before they were answered (reset by the client, or its connection closed).
public final class TestH2Origin: Sendable {
    public struct Request: Sendable {
        public var path: String
        public var method: String
        public var headers: [(name: String, value: String)]
        public var connection: Int
        /// `HTTP/2` or `HTTP/1.1`.
        public var version: String
        public func header(_ name: String) -> String? { headers.first { $0.name == name.lowercased() }?.value }
    }

    struct State {
        var requests: [Request] = []
        var connections = 0
        var held: [String: [@Sendable () -> Void]] = [:]
        var released: Set<String> = []
        var abandoned = 0
    }

    public let port: Int
    private let serverChannel: any Channel
    let state: Mutex<State>

    private init(port: Int, serverChannel: any Channel) {
        self.port = port
        self.serverChannel = serverChannel
        self.state = Mutex(State())
    }

    public var requests: [Request] { state.withLock { $0.requests } }
    public var acceptedConnections: Int { state.withLock { $0.connections } }
    /// Held requests whose stream ended unanswered: the client's cancel reached the origin.
    public var abandonedRequests: Int { state.withLock { $0.abandoned } }

    /// Answers the `/held?key=K` requests waiting (and any later ones) with `released\n`.
    public func release(_ key: String) {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.released.insert(key)
            return state.held.removeValue(forKey: key) ?? []
        }
        for answer in waiting { answer() }
    }

    public static func start(tls: TestTLSIdentity) async throws -> TestH2Origin {
        let sslContext = try tls.makeServerContext(clientCA: nil, alpn: ["h2", "http/1.1"])
        let origin = OriginBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = origin.value!.state.withLock { state in
                        state.connections += 1
                        return state.connections
                    }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(ApplicationProtocolNegotiationHandler { result, channel in
                        channel.eventLoop.makeCompletedFuture {
                            let pipeline = channel.pipeline.syncOperations
                            guard case .negotiated("h2") = result else {
                                try pipeline.configureHTTPServerPipeline()
                                try pipeline.addHandler(H1OriginHandler(origin: origin.value!, connection: id))
                                return
                            }
                            _ = try pipeline.configureHTTP2Pipeline(
                                mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()
                            ) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    try stream.pipeline.syncOperations.addHandler(H2OriginStream(origin: origin.value!, connection: id))
                                }
                            }
                        }
                    })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let made = TestH2Origin(port: channel.localAddress!.port!, serverChannel: channel)
        origin.value = made
        return made
    }

    public static func with<T>(tls: TestTLSIdentity, _ body: (TestH2Origin) async throws -> T) async throws -> T {
        let origin = try await start(tls: tls)
        do {
            let result = try await body(origin)
            try? await origin.serverChannel.close()
            return result
        } catch {
            try? await origin.serverChannel.close()
            throw error
        }
    }
}

/// Set once, before the first connection is accepted.
private final class OriginBox: @unchecked Sendable {
    var value: TestH2Origin?
}

/// One request stream of the origin. Event-loop bound.
private final class H2OriginStream: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let origin: TestH2Origin
    private let connection: Int
    private var head: HPACKHeaders?
    private var body = ByteBuffer()
    private var trailers: HPACKHeaders?
    /// A `/held` request not yet answered.
    private var waiting = false

    init(origin: TestH2Origin, connection: Int) {
        self.origin = origin
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if head == nil, headers.headers.first(name: ":path") == "/stall" { return stall(context, headers.headers) }
            if head == nil { head = headers.headers } else { trailers = headers.headers }
            if headers.endStream { respond(context: context) }
        case .data(let data):
            if case .byteBuffer(var buffer) = data.data { body.writeBuffer(&buffer) }
            if data.endStream { respond(context: context) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if waiting { origin.state.withLock { $0.abandoned += 1 } }
        context.fireChannelInactive()
    }

    private func stall(_ context: ChannelHandlerContext, _ head: HPACKHeaders) {
        origin.state.withLock {
            $0.requests.append(.init(path: "/stall", method: head.first(name: ":method") ?? "",
                                     headers: head.map { ($0.name, $0.value) }, connection: connection, version: "HTTP/2"))
        }
        _ = context.channel.setOption(ChannelOptions.autoRead, value: false)
    }

    private func respond(context: ChannelHandlerContext) {
        let head = head ?? HPACKHeaders()
        let fullPath = head.first(name: ":path") ?? "/"
        let path = String(fullPath.split(separator: "?", maxSplits: 1).first ?? "/")
        let query = Self.query(fullPath)
        origin.state.withLock {
            $0.requests.append(.init(path: path, method: head.first(name: ":method") ?? "",
                                     headers: head.map { ($0.name, $0.value) }, connection: connection, version: "HTTP/2"))
        }
        switch path {
        case "/hello":
            send(context, status: 200, body: "hello over h2\n")
        case "/echo":
            send(context, status: 200, body: String(buffer: body), trailers: trailers.map { Array($0.map { ($0.name, $0.value) }) })
        case "/trailers":
            send(context, status: 200, body: "body\n", trailers: [("x-checksum", "1234"), ("grpc-status", "0")])
        case "/drip":
            let chunks = query["chunks"].flatMap(Int.init) ?? 5
            let interval = query["interval_ms"].flatMap(Int64.init) ?? 100
            let size = query["size"].flatMap(Int.init) ?? 16
            context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: [":status": "200"]))), promise: nil)
            drip(context, remaining: chunks, interval: interval, size: size)
        case "/held":
            let key = query["key"] ?? ""
            let loop = context.eventLoop
            waiting = true
            let answer = NIOLoopBound({ [self] in
                waiting = false
                send(context, status: 200, body: "released\n")
            }, eventLoop: loop)
            let now = origin.state.withLock { state -> Bool in
                if state.released.contains(key) { return true }
                state.held[key, default: []].append { loop.execute { answer.value() } }
                return false
            }
            if now {
                waiting = false
                send(context, status: 200, body: "released\n")
            }
        default:
            if path.hasPrefix("/bytes/"), let count = Int(path.dropFirst("/bytes/".count)) {
                send(context, status: 200, body: String(repeating: "x", count: count))
            } else {
                send(context, status: 404, body: "no route \(path)\n")
            }
        }
    }

    private func drip(_ context: ChannelHandlerContext, remaining: Int, interval: Int64, size: Int) {
        guard context.channel.isActive else { return }
        if remaining == 0 {
            context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer()), endStream: true))), promise: nil)
            return
        }
        let chunk = ByteBuffer(string: String(repeating: "d", count: size))
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(chunk)))), promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(interval)) {
            let (handler, context) = bound.value
            handler.drip(context, remaining: remaining - 1, interval: interval, size: size)
        }
    }

    private func send(_ context: ChannelHandlerContext, status: Int, body: String, trailers: [(String, String)]? = nil) {
        let headers = HPACKHeaders([(":status", "\(status)"), ("content-type", "text/plain")])
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        let hasTrailers = !(trailers ?? []).isEmpty
        context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(ByteBuffer(string: body)), endStream: !hasTrailers))), promise: nil)
        if let trailers, hasTrailers {
            context.write(wrapOutboundOut(.headers(.init(headers: HPACKHeaders(trailers), endStream: true))), promise: nil)
        }
        context.flush()
    }

    private static func query(_ path: String) -> [String: String] {
        guard let mark = path.firstIndex(of: "?") else { return [:] }
        var result: [String: String] = [:]
        for pair in path[path.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            result[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return result
    }
}

/// The HTTP/1.1 side of the origin: records the request, answers `hello over HTTP/1.1`. Event-loop bound.
private final class H1OriginHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origin: TestH2Origin
    private let connection: Int
    private var head: HTTPRequestHead?

    init(origin: TestH2Origin, connection: Int) {
        self.origin = origin
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            origin.state.withLock {
                $0.requests.append(.init(path: head.uri, method: head.method.rawValue,
                                         headers: head.headers.map { ($0.name, $0.value) }, connection: connection,
                                         version: "HTTP/1.1"))
            }
            let body = ByteBuffer(string: "hello over HTTP/1.1\n")
            var headers = HTTPHeaders([("Content-Type", "text/plain")])
            headers.add(name: "Content-Length", value: "\(body.readableBytes)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
