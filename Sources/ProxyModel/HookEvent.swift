/// Something a hook or rule did during an exchange, in the words the log uses.
/// `detail` never holds a secret.
public struct HookEvent: Sendable, Hashable, Codable {
    /// Which moment of the exchange produced the event: when each hook fires, and on which thread.
    ///
    /// | hook | fires | thread |
    /// | --- | --- | --- |
    /// | `rule` | the request head is planned (`RuleSet.plan`): `map_remote`, `respond`, `redirect_client`, header edits, `delay`; again for each followed hop | the client connection's event loop |
    /// | `intercept` | a request arrives inside an intercepted CONNECT tunnel | event loop |
    /// | `reverse` | a request arrives at a `--reverse` listener | event loop |
    /// | `trust` | the upstream's certificate chain is checked, during the TLS handshake, before any request byte goes out | the client connection's event loop, inside curl (OpenSSL's verify callback) |
    /// | `challenge` | a 401/407 arrives: `use_credential` answers it inside curl (the next round follows at once); `cancel` answers the client when the head reaches the exchange | event loop (inside curl / in the exchange) |
    /// | `redirect` | a 3xx head reaches the exchange, before the client sees it: `pass`, `block`, `rewrite`, `follow` (the next hop starts when the 3xx ends) | event loop |
    /// | `body` | a body transform ran on a whole request or response body (or skipped it: over --body-limit) | the transform pool; recorded on the event loop |
    /// | `throttle` | an exchange under a `throttle` (rules per field, then `--throttle`) starts, and again for each followed hop: the limits in force and where they came from | event loop |
    /// | `upstream` | what the upstream sent beside its response: a 1xx (102, 103, …) forwarded to the client, or not and why | event loop |
    ///
    /// Events made inside curl travel with the transfer's outcome to the exchange; the log record is always built
    /// on the event loop, by the exchange.
    public enum Hook: String, Sendable, Hashable, Codable {
        case rule, redirect, challenge, trust, intercept, reverse, body, throttle, upstream
    }

    public var hook: Hook
    public var action: String
    public var detail: String
    /// On a `trust` event made in a handshake: the chain the server presented, leaf first.
    public var chain: [CertificateSummary]?

    public init(hook: Hook, action: String, detail: String = "", chain: [CertificateSummary]? = nil) {
        self.hook = hook
        self.action = action
        self.detail = detail
        self.chain = chain
    }

    /// The console form, e.g. `redirect followed 2 hops` or `trust rejected: no pin matched`.
    public var logText: String {
        detail.isEmpty ? action : "\(action): \(detail)"
    }
}
