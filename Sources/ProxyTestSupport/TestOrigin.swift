import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A real HTTP/1.1 origin server on 127.0.0.1 (a free port) for tests, built on SwiftNIO. Records what it receives.
///
/// Routes (every route answers HEAD with the same head and no body; a request is answered once its end arrived):
/// - `/echo` — 200, body = the request body; headers `X-Method`, `X-Target` (the request target as received).
/// - `/headers` — 200 text/plain, body = the raw request head exactly as received (request line and header lines
///   with their case, order and spacing, CRLFs, the final empty line).
/// - `/bytes/N` — N bytes of `pattern(count:)` (byte i = `UInt8(i % 251)`) with Content-Length, written only while
///   the channel is writable (1 GiB streams in constant memory). `/chunked/N` — the same bytes, chunked.
/// - `/drip?chunks=K&interval_ms=M&size=S` — chunked; the pattern in K chunks of S bytes, one every M ms (the first at
///   once). Defaults K=5, M=100, S=16.
/// - `/sha256` — consumes the request body as it streams and answers `<hex sha256> <byte count>`.
/// - `/status/CODE` — that status with body `status CODE\n`; none for 204/304; a 1xx (not 101) is sent as an
///   informational response followed by a final 200 `final after CODE\n`.
/// - `/set-cookies` — three separate `Set-Cookie` headers (a=1, b=2, c=3).
/// - `/head-test` — 200, `X-Head-Test: yes`, body `head-test body\n` (Content-Length 15, also for HEAD).
/// - `/close-mid-body/N` — declares Content-Length N, sends N/2 pattern bytes, closes the connection.
/// - `/hang` — reads the request and never answers (until the client leaves or `shutdown()`).
/// - `/slow-head?ms=M` — waits M ms (default 1000), then 200 `slow head\n`.
/// - `/held?key=K` — waits until the test calls `release("K")` (at once if it already did), then 200 `slow head\n`.
///   With `&first=TEXT`: a chunked 200 whose first chunk `TEXT` goes out at once; `released\n` and the end follow
///   the release. Deterministic where a timer would guess how slow the machine is.
/// - `/redirect?to=URL&status=30x` — that status (default 302) with `Location: URL` (percent-decoded).
/// - `/redirect-chain/N` — 302 to `/redirect-chain/N-1`; `/redirect-chain/0` is 200 `chain done\n`.
/// - `/redirect-loop` — 302 to itself.
/// - `/auth/basic?user=U&pass=P` — 401 with `WWW-Authenticate: Basic realm="test"` unless the request carries
///   those Basic credentials; then 200 echoing the body (with `X-Method`, `X-Target`).
/// - `/auth/digest?user=U&pass=P` — RFC 7616 Digest (realm "test", MD5, qop=auth): 401 with a fresh nonce unless the
///   `Authorization: Digest` answer's response hash verifies against U and P for a nonce this origin issued; then 200
///   echoing the body with `X-Digest-Verified: true` (and `digestSuccesses` counts it).
/// - anything else — 404.
///
/// Started with `proxyAuth`, it is also a tiny upstream HTTP proxy: absolute-form requests (`GET http://…`) and
/// `CONNECT host:port` need `Proxy-Authorization: Basic` with those credentials (else 407 with
/// `Proxy-Authenticate: Basic realm="upstream"`); it forwards `http://` requests (buffered, one per connection) and
/// tunnels CONNECT. Origin-form requests still go to the routes above.
///
/// With `tls`, it speaks HTTPS (ALPN `http/1.1`); with `clientCA` too, it requires a client certificate issued by it.
///
/// Thread safety: every member may be used from any thread; handlers run on NIO's event loops.
public final class TestOrigin: Sendable {
    /// A user name and password (for `proxyAuth`).
    public struct Credentials: Sendable, Hashable {
        public var user: String
        public var password: String
        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }
    }

    /// Request bodies are recorded up to this many bytes (their full length is always counted).
    public static let bodyRecordLimit = 16 * 1024 * 1024

    public let port: Int
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    public let baseURL: String
    private let serverChannel: any Channel
    private let recorder: OriginRecorder

    private init(port: Int, scheme: String, serverChannel: any Channel, recorder: OriginRecorder) {
        self.port = port
        self.baseURL = "\(scheme)://127.0.0.1:\(port)"
        self.serverChannel = serverChannel
        self.recorder = recorder
    }

    /// Binds 127.0.0.1:0 and starts serving. Call `shutdown()` when done.
    public static func start(tls: TestTLSIdentity? = nil, clientCA: TestCertificate? = nil,
                             proxyAuth: Credentials? = nil) async throws -> TestOrigin {
        let recorder = OriginRecorder()
        let sslContext = try tls.map { try $0.makeServerContext(clientCA: clientCA) }
        let configuration = OriginConfiguration(recorder: recorder, scheme: tls == nil ? "http" : "https",
                                                proxyCredentials: proxyAuth, bodyRecordLimit: bodyRecordLimit)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try TestOrigin.configure(channel, configuration: configuration, sslContext: sslContext)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw TestSupportError("TestOrigin: bound channel has no port")
        }
        return TestOrigin(port: port, scheme: configuration.scheme, serverChannel: channel, recorder: recorder)
    }

    private static func configure(_ channel: any Channel, configuration: OriginConfiguration,
                                  sslContext: NIOSSLContext?) throws {
        let pipeline = channel.pipeline.syncOperations
        if let sslContext { try pipeline.addHandler(NIOSSLServerHandler(context: sslContext)) }
        let id = configuration.recorder.newConnection(closer: ChannelCloserBox(channel: channel))
        let tap = ConnectionTap(id: id, recorder: configuration.recorder)
        let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes))
        let encoder = HTTPResponseEncoder()
        let pipelining = HTTPServerPipelineHandler()
        let errors = HTTPServerProtocolErrorHandler()
        let handler = OriginHandler(configuration: configuration, tap: tap)
        handler.httpHandlers = [pipelining, errors, encoder, decoder]
        try pipeline.addHandlers([tap, decoder, encoder, pipelining, errors, handler])
    }

    /// Starts an origin, runs `body` with it, and shuts it down whether `body` returns or throws.
    public static func with<T>(tls: TestTLSIdentity? = nil, clientCA: TestCertificate? = nil,
                               proxyAuth: Credentials? = nil,
                               _ body: (TestOrigin) async throws -> T) async throws -> T {
        let origin = try await start(tls: tls, clientCA: clientCA, proxyAuth: proxyAuth)
        do {
            let result = try await body(origin)
            try await origin.shutdown()
            return result
        } catch {
            try? await origin.shutdown()
            throw error
        }
    }

    /// Closes the listener and every connection still open (hanging requests included).
    public func shutdown() async throws {
        try? await serverChannel.close()
        let open = recorder.state.withLock { Array($0.openChannels.values) }
        for closer in open { closer.closeNow() }
    }

    // MARK: recordings

    /// Every request received so far, in the order their ends arrived.
    public var requests: [RecordedRequest] { recorder.state.withLock { $0.requests } }
    /// Every accepted TCP connection so far.
    public var connections: [ConnectionRecord] { recorder.state.withLock { $0.connections } }
    /// How many TCP connections were accepted (1 for two requests proves reuse).
    public var acceptedConnections: Int { recorder.state.withLock { $0.connections.count } }
    /// How many TLS handshakes completed.
    public var tlsHandshakes: Int { recorder.state.withLock { $0.connections.filter(\.tlsHandshakeCompleted).count } }
    /// Application bytes received over all connections (after TLS decryption).
    public var requestBytesReceived: Int { recorder.state.withLock { $0.connections.reduce(0) { $0 + $1.bytesReceived } } }
    /// Whether any connection received any request byte (false after a trust rejection).
    public var receivedAnyRequestBytes: Bool { requestBytesReceived > 0 }
    /// Lets every `/held?key=K` response go (now and for later requests).
    public func release(_ key: String) { recorder.release(key) }
    /// How many Digest answers verified.
    public var digestSuccesses: Int { recorder.state.withLock { $0.digestSuccesses } }
    /// Body bytes the streaming routes (`/bytes`, `/chunked`, `/close-mid-body`) have written so far: how far the
    /// origin got ahead of a slow reader (it writes only while its socket takes more).
    public var bytesStreamed: Int { recorder.state.withLock { $0.bytesStreamed } }
    /// The most streamed body bytes one connection had queued and not yet written to its socket: stays near the
    /// channel's write-buffer high-water mark when the origin streams and does not buffer.
    public var peakQueuedBytes: Int { recorder.state.withLock { $0.peakQueuedBytes } }
}

/// Closes one accepted channel from any thread.
struct ChannelCloserBox: ChannelCloser {
    let channel: any Channel
    func closeNow() { channel.close(promise: nil) }
}

/// A failure of the test support itself (not of the code under test).
public struct TestSupportError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
