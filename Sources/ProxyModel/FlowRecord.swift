import FoundationEssentials

/// A captured body: the first bytes up to the capture limit, and whether more was seen.
public struct CapturedBody: Sendable, Hashable {
    public var bytes: [UInt8]
    public var truncated: Bool
    public init(bytes: [UInt8] = [], truncated: Bool = false) {
        self.bytes = bytes
        self.truncated = truncated
    }
}

/// Everything the traffic log knows about one upstream exchange (one hop of a followed redirect is one record).
/// Built by the server when the exchange ends; immutable afterwards and safe to hand to logging threads.
/// Header values here are as sent: redaction is the log writers' job.
public struct FlowRecord: Sendable {
    public var id: Int
    public var start: Date
    public var client: String
    public var request: RequestHead
    /// The URL as the client sent it.
    public var url: String
    /// The URL hookproxy actually fetched (after `map_remote`); nil when answered locally.
    public var upstreamURL: String?
    public var response: ResponseHead?
    public var requestBodySize: Int
    public var responseBodySize: Int
    public var requestBody: CapturedBody?
    public var responseBody: CapturedBody?
    public var timings: Timings
    public var durationMs: Double
    public var rules: [String]
    public var events: [HookEvent]
    public var error: String?
    /// 0 for the exchange the client asked for; 1, 2… for the hops of a followed redirect.
    public var hop: Int
    /// The upstream server's address and the connection id, when curl reported them.
    public var serverIP: String?
    public var connectionID: String?
    /// Values hookproxy itself added (credentials, header values rules set from `${VAR}`): never logged, even with
    /// --log-secrets. The log masks them where they stand (a header value or a word of it, a word of a body or
    /// of text, a URL's userinfo), never inside longer text.
    public var secretValues: [String]
    /// Set when the server accepted an upgrade (101): the WebSocket session (or raw relay) that followed.
    public var webSocket: WebSocketLog?
    /// The response's trailer fields as forwarded (gRPC's `grpc-status` and `grpc-message`); nil without any.
    public var responseTrailers: HeaderFields?

    public init(
        id: Int, start: Date, client: String, request: RequestHead, url: String, upstreamURL: String? = nil,
        response: ResponseHead? = nil, requestBodySize: Int = 0, responseBodySize: Int = 0,
        requestBody: CapturedBody? = nil, responseBody: CapturedBody? = nil, timings: Timings = Timings(),
        durationMs: Double = 0, rules: [String] = [], events: [HookEvent] = [], error: String? = nil, hop: Int = 0,
        serverIP: String? = nil, connectionID: String? = nil, secretValues: [String] = [],
        webSocket: WebSocketLog? = nil, responseTrailers: HeaderFields? = nil
    ) {
        self.id = id
        self.start = start
        self.client = client
        self.request = request
        self.url = url
        self.upstreamURL = upstreamURL
        self.response = response
        self.requestBodySize = requestBodySize
        self.responseBodySize = responseBodySize
        self.requestBody = requestBody
        self.responseBody = responseBody
        self.timings = timings
        self.durationMs = durationMs
        self.rules = rules
        self.events = events
        self.error = error
        self.hop = hop
        self.serverIP = serverIP
        self.connectionID = connectionID
        self.secretValues = secretValues
        self.webSocket = webSocket
        self.responseTrailers = responseTrailers
    }
}
