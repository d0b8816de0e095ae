import ProxyModel

/// A response hookproxy gives itself (`respond`, `redirect_client`), without asking the upstream.
public struct LocalResponse: Sendable {
    public var head: ResponseHead
    public var body: [UInt8]
    public init(head: ResponseHead, body: [UInt8]) {
        self.head = head
        self.body = body
    }
}

/// Transforms a whole body (`replace`, `json`, `file`), decoding gzip/deflate first when the headers say so.
/// Pure and thread-safe; run off the event loop for large bodies.
public protocol BodyTransforming: Sendable {
    /// Returns the new body, with `headers` fixed (Content-Encoding removed when decoded, Content-Length corrected),
    /// and notes for the log (e.g. why a JSON path was impossible).
    func apply(to body: [UInt8], headers: inout HeaderFields) -> (body: [UInt8], notes: [String])
    /// The names of the rules whose steps this applies, for warnings that must name them.
    var ruleNames: [String] { get }
}

extension BodyTransforming {
    public var ruleNames: [String] { [] }
}

/// What the rules decided for one request. Made once per exchange from one RuleSet snapshot.
///
/// How the server uses it:
/// - `localResponse` set: answer the client with it and stop. It is **final**: `response` status and header
///   edits and response body transforms of every matching rule are already applied. Do not apply
///   `editResponse` / `responseBodyTransform` to it again.
/// - otherwise: `editRequest(&head)` (URL, Host, header edits), wait `delayMs`, run `requestBodyTransform` on the
///   buffered body if set, send to `upstreamURL`; on the response head call `editResponse(&head)`, and run
///   `responseBodyTransform` on the buffered body if set.
/// - Host with `map_remote`: `editRequest` sets `Host` to the mapped authority, then applies the rules'
///   `set_headers` — so a rule's `set_headers: {Host: …}` wins. `hostFromRules` says whether a rule set it, for a
///   server that (re)computes Host from the URL itself.
public struct FlowPlan: Sendable {
    /// Names of the rules that matched, in file order.
    public var firedRules: [String]
    /// What the rules did, for the log line (e.g. `mapped → http://127.0.0.1:9000/v1/u`).
    public var events: [HookEvent]
    /// Where to send the request (the client's URL unless `map_remote` changed it).
    public var upstreamURL: ProxyURL
    /// Answer locally and stop (`respond` / `redirect_client`), already with response edits applied.
    public var localResponse: LocalResponse?
    public var delayMs: Int
    /// The matching rules' `throttle`, per field from the first rule that sets it; nil when none sets one. The
    /// server fills the fields no rule sets from `--throttle` (`Throttle.filling(from:)`).
    public var throttle: Throttle?
    public var requestEdits: [HeaderEdit]
    public var requestBodyTransform: (any BodyTransforming)?
    public var responseEdits: [HeaderEdit]
    public var responseBodyTransform: (any BodyTransforming)?
    /// Every matching rule's `websocket.to_server` / `to_client` body steps, for the text messages of a session.
    public var webSocketToServer: (any BodyTransforming)?
    public var webSocketToClient: (any BodyTransforming)?
    public var onRedirect: RedirectPolicy?
    public var onChallenge: ChallengePolicy?
    public var trust: TrustPolicy?
    /// The rule whose `map_remote` produced `upstreamURL`; nil when the request goes where the client sent it.
    public var mappedBy: String?

    public init(upstreamURL: ProxyURL) {
        self.firedRules = []
        self.events = []
        self.upstreamURL = upstreamURL
        self.localResponse = nil
        self.delayMs = 0
        self.requestEdits = []
        self.requestBodyTransform = nil
        self.responseEdits = []
        self.responseBodyTransform = nil
    }

    /// Prepares the head sent upstream: when `map_remote` fired, `head.url` becomes `upstreamURL` and `Host` its
    /// authority; then every matching rule's `request` header edits apply in file order (so a rule's
    /// `set_headers: {Host: …}` wins over the mapped host).
    public func editRequest(_ head: inout RequestHead) {
        if mappedBy != nil {
            head.url = upstreamURL
            head.headers.set("Host", upstreamURL.authority)
        }
        for edit in requestEdits { edit.apply(to: &head.headers) }
    }

    /// The Host value a rule's `request.set_headers` sets (last one wins), or nil.
    public var hostFromRules: String? {
        requestEdits.reversed().lazy.compactMap { edit in
            edit.set.last(where: { $0.name.caseInsensitiveEquals("Host") })?.value
        }.first
    }

    /// Header values the matching rules set from the environment (`${VAR}` in `set_headers`): the server hands
    /// them to the log as `FlowRecord.secretValues`, so they are masked even with `--log-secrets`.
    public var secretValues: [String] {
        (requestEdits + responseEdits).flatMap(\.secretValues)
    }

    /// Applies every matching rule's `response` edits (status, headers) in file order.
    public func editResponse(_ head: inout ResponseHead) {
        for edit in responseEdits {
            if let status = edit.status {
                head.status = status
                head.reason = ResponseHead.standardReason(for: status)
            }
            edit.apply(to: &head.headers)
        }
    }
}

/// `set_headers` / `remove_headers` (and, for responses, `status`) of one rule.
public struct HeaderEdit: Sendable, Hashable {
    public var set: [HeaderField]
    public var remove: [String]
    public var status: Int?
    /// Values in `set` that `${VAR}` filled from the environment: secrets, never logged (see `FlowPlan.secretValues`).
    public var secretValues: [String]

    public init(set: [HeaderField] = [], remove: [String] = [], status: Int? = nil, secretValues: [String] = []) {
        self.set = set
        self.remove = remove
        self.status = status
        self.secretValues = secretValues
    }

    public func apply(to headers: inout HeaderFields) {
        for name in remove { headers.remove(name) }
        for field in set { headers.set(field.name, field.value) }
    }
}
