import ProxyModel

/// One request of a HAR file, ready to send again, with what was recorded for it.
///
/// A redirect that hookproxy followed is recorded as one entry per hop (`_hookproxy.hop` 0, 1, …); the chain is one
/// `ReplayEntry`: the hop-0 request is sent (the rules follow the redirect again), and `recorded` is the final hop's
/// response, the one the client received.
public struct ReplayEntry: Sendable {
    /// What the client received when the HAR was recorded.
    public struct Recorded: Sendable, Hashable {
        /// The status; 0 when the exchange failed without a response.
        public var status: Int
        /// Response body bytes (`content.size`, else `bodySize`); -1 when unknown.
        public var size: Int
        public init(status: Int, size: Int) {
            self.status = status
            self.size = size
        }
    }

    /// Whether a hop answered `status` can have a next hop: a 3xx other than 304, as `on_redirect` follows them.
    static func isRedirect(_ status: Int) -> Bool { (300..<400).contains(status) && status != 304 }

    /// Whether the entry is sent.
    public enum Disposition: Sendable, Hashable {
        case send
        /// The HAR does not hold what it would take to send the request faithfully (a truncated body, a redacted
        /// URL): counted as a failure, not sent.
        case notReplayable(String)
        /// Not an HTTP exchange a replay can repeat (another URL scheme, a protocol upgrade): listed, not counted.
        case skipped(String)
    }

    /// 1-based position of the (hop-0) entry in the file.
    public var number: Int
    public var method: String
    /// The URL as recorded (shown and matched by `--only`).
    public var url: String
    /// What is sent: the recorded headers without hop-by-hop headers, `Host`, `Content-Length` and redacted
    /// values; `Content-Length` is added for the body.
    public var headers: HeaderFields
    public var body: [UInt8]
    public var recorded: Recorded
    public var disposition: Disposition
    /// Names of headers left out because the HAR holds `<redacted>` for them.
    public var redactedHeaders: [String]

    public init(number: Int, method: String, url: String, headers: HeaderFields = [], body: [UInt8] = [],
                recorded: Recorded, disposition: Disposition = .send, redactedHeaders: [String] = []) {
        self.number = number
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.recorded = recorded
        self.disposition = disposition
        self.redactedHeaders = redactedHeaders
    }
}
