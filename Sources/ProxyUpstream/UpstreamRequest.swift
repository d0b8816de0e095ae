import ProxyModel

/// Everything the upstream engine needs to carry one request: built and carried on the client connection's event loop.
public struct UpstreamRequest: Sendable {
    /// How the request body is framed upstream.
    public enum Body: Sendable, Hashable {
        /// No body (GET, HEAD, …).
        case none
        /// Exactly this many bytes (Content-Length).
        case length(Int64)
        /// Length unknown: sent chunked.
        case chunked
    }

    public var head: RequestHead
    public var body: Body
    public var settings: UpstreamSettings
    public var trust: TrustPolicy?
    public var challenge: ChallengePolicy?
    /// Only connect (through `--upstream-proxy`, TLS checked by `trust`) and hand the connection over: the
    /// request itself is the caller's to send (`UpstreamEngine.connect`, for upgrades such as WebSocket).
    public var connectOnly: Bool

    public init(head: RequestHead, body: Body, settings: UpstreamSettings, trust: TrustPolicy? = nil,
                challenge: ChallengePolicy? = nil, connectOnly: Bool = false) {
        self.head = head
        self.body = body
        self.settings = settings
        self.trust = trust
        self.challenge = challenge
        self.connectOnly = connectOnly
    }
}

/// Engine-wide upstream settings from the command line.
public struct UpstreamSettings: Sendable, Hashable {
    public var connectTimeoutMs: Int
    /// No bytes either way for this long ends the transfer with a timeout.
    public var idleTimeoutMs: Int
    /// `--upstream-proxy URL`; nil for direct connections.
    public var upstreamProxy: String?
    /// How many idle upstream connections libcurl keeps for reuse (CURLMOPT_MAXCONNECTS): part of the process's
    /// file descriptor budget.
    public var maxCachedConnections: Int
    /// `--verify-time`: upstream certificate dates are checked at this instant instead of now, by `trust` rules
    /// without a `verify_time` of their own and by curl's default verification alike.
    public var verifyTime: UTCInstant?
    /// HTTP/2 with TLS origins that offer it (ALPN), multiplexed; false (`--upstream-http1`): HTTP/1.1 only.
    /// Cleartext upstreams always get HTTP/1.1.
    public var http2: Bool
    /// True: a sleeping event loop is woken through its own selector when one of its curl sockets becomes ready
    /// (where the kernel allows it); false: the watcher thread wakes it, with a hop (the fallback, and for tests).
    public var kernelWakeups: Bool

    public init(connectTimeoutMs: Int = 10_000, idleTimeoutMs: Int = 60_000, upstreamProxy: String? = nil,
                maxCachedConnections: Int = 512, http2: Bool = true, verifyTime: UTCInstant? = nil,
                kernelWakeups: Bool = true) {
        self.http2 = http2
        self.kernelWakeups = kernelWakeups
        self.connectTimeoutMs = connectTimeoutMs
        self.idleTimeoutMs = idleTimeoutMs
        self.upstreamProxy = upstreamProxy
        self.maxCachedConnections = maxCachedConnections
        self.verifyTime = verifyTime
    }
}

/// What a finished transfer reports: the measurements, or the failure in words a user can act on.
public struct UpstreamOutcome: Sendable {
    public var timings: Timings
    public var serverIP: String?
    public var connectionID: String?
    public var error: ProxyError?
    public var events: [HookEvent]
    /// The response's trailers (HTTP/2 trailers, or HTTP/1.1 chunked trailer fields), when it had any.
    public var trailers: HeaderFields?

    public init(timings: Timings = Timings(), serverIP: String? = nil, connectionID: String? = nil,
                error: ProxyError? = nil, events: [HookEvent] = []) {
        self.timings = timings
        self.serverIP = serverIP
        self.connectionID = connectionID
        self.error = error
        self.events = events
    }
}

/// What the body callbacks answer libcurl.
public enum BodyFlow: Sendable, Equatable {
    /// The bytes were taken (write) or this many were produced (read).
    case bytes(Int)
    /// Nothing now: libcurl pauses this direction until `UpstreamTransfer.resume()`.
    case pause
    /// The request body is complete (read only).
    case end
    /// Give up: the transfer ends with this reason as its error (its connection's other transfers go on).
    case abort(String)
}

/// The receiving side of one upstream transfer (implemented by the server's exchange bridge).
///
/// Every method is called on the event loop the transfer was started on, from inside libcurl, in order:
/// `didReceiveInformational` for each 1xx head other than 101 (none after the final head), `didReceiveHead` once (for
/// the final, non-1xx response), `didReceiveBody` any number of times, then `didComplete`
/// exactly once (unless the transfer was cancelled). `provideRequestBody` is called whenever libcurl wants request
/// bytes. None of them may block or throw, and none may call back into the engine synchronously (a `resume` or
/// `cancel` made from inside a callback waits for the loop's next turn): they hand data on and return.
public protocol UpstreamTransferDelegate: AnyObject, Sendable {
    /// An informational (1xx, not 101) response head: 100 Continue, 102 Processing, 103 Early Hints. By default,
    /// dropped.
    func didReceiveInformational(_ head: ResponseHead)
    func didReceiveHead(_ head: ResponseHead)
    /// Take all of `bytes` and return `.bytes(bytes.count)`, or return `.pause` to take none now.
    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow
    /// The same, for a transfer that may share its connection (HTTP/2): `mayPause` says whether pausing it holds up
    /// no other transfer (libcurl 7.88 pauses an HTTP/2 one with its whole connection), which stays so until
    /// `connectionShared`. By default, `didReceiveBody(_:)`.
    func didReceiveBody(_ bytes: UnsafeRawBufferPointer, mayPause: () -> Bool) -> BodyFlow
    /// Another transfer took this one's connection after `mayPause` said yes: it may no longer pause (the engine
    /// resumes it).
    func connectionShared()
    /// Copy up to `buffer.count` request bytes into `buffer`.
    func provideRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyFlow
    /// libcurl asks to send the request body again (auth round, replay); return false when that is impossible.
    func rewindRequestBody() -> Bool
    /// The request's trailer fields, asked once the body has ended (sent only by an HTTP/1.1 chunked upload:
    /// libcurl 7.88 has no way to send them on HTTP/2).
    func requestTrailers() -> HeaderFields?
    func didComplete(_ outcome: UpstreamOutcome)
}

extension UpstreamTransferDelegate {
    public func didReceiveInformational(_ head: ResponseHead) {}
    public func didReceiveBody(_ bytes: UnsafeRawBufferPointer, mayPause: () -> Bool) -> BodyFlow { didReceiveBody(bytes) }
    public func connectionShared() {}
    public func rewindRequestBody() -> Bool { false }
    public func requestTrailers() -> HeaderFields? { nil }
}
