/// What the proxy answered to one replayed request.
public struct ReplayResponse: Sendable, Hashable {
    /// The status; 0 when no response head arrived.
    public var status: Int
    /// Response body bytes received.
    public var size: Int
    /// Why the request failed, when it did: hookproxy's own error answer (`hookproxy: cannot connect to …`, the
    /// same words as the 502/504 body), or what went wrong talking to the proxy.
    public var failure: String?

    public init(status: Int, size: Int, failure: String? = nil) {
        self.status = status
        self.size = size
        self.failure = failure
    }
}
