import FoundationEssentials
import Glibc
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUpstream

/// The facts of one client request that the log needs, whatever path it takes.
struct RequestContext {
    let head: HTTPRequestHead
    let client: String
    let start: Date
    var clientHead: RequestHead?
    var rules: [String] = []
    /// The request body read while answering locally (the log records it like any other).
    var requestBodySize = 0
    var requestBody: CapturedBody?
    /// A request to the traffic viewer: answered, never recorded as a flow.
    var isViewerRequest = false

    init(head: HTTPRequestHead, client: String, start: Date) {
        self.head = head
        self.client = client
        self.start = start
    }

    func with(clientHead: RequestHead, plan: FlowPlan) -> RequestContext {
        var copy = self
        copy.clientHead = clientHead
        copy.rules = plan.firedRules
        return copy
    }

    /// What an upstream hop adds to its record; a request answered locally has none.
    struct Hop {
        var number: Int
        var start: Date
        /// The request as sent upstream (after rules), and the URL the hop was asked for.
        var upstreamRequest: RequestHead
        var url: String
        /// `upstreamRequest.url` as text, when the caller has it already.
        var upstreamURL: String? = nil
        var requestBodySize: Int
        var requestBody: CapturedBody?
        var outcome: UpstreamOutcome?
        var rules: [String]
        var error: String?
        var secretValues: [String]
    }

    /// The log record of this request: the one place a `FlowRecord` is built, for a local answer (`hop` nil) and
    /// for every upstream hop alike.
    func record(id: Int, response: ResponseHead?, bodySize: Int, events: [HookEvent],
                responseBody: CapturedBody? = nil, hop: Hop? = nil, error: String? = nil) -> FlowRecord {
        let start = hop?.start ?? self.start
        let outcome = hop?.outcome
        return FlowRecord(
            id: id, start: start, client: client, request: hop?.upstreamRequest ?? clientHeadOrParsed,
            url: hop?.url ?? clientHead?.url.description ?? head.uri, upstreamURL: hop.map { $0.upstreamURL ?? $0.upstreamRequest.url.description },
            response: response, requestBodySize: hop?.requestBodySize ?? requestBodySize, responseBodySize: bodySize,
            requestBody: hop == nil ? requestBody : hop?.requestBody, responseBody: responseBody,
            timings: outcome?.timings ?? Timings(), durationMs: Date().timeIntervalSince(start) * 1000,
            rules: hop?.rules ?? rules, events: events + (outcome?.events ?? []), error: error ?? hop?.error,
            hop: hop?.number ?? 0, serverIP: outcome?.serverIP, connectionID: outcome?.connectionID,
            secretValues: hop?.secretValues ?? [], responseTrailers: outcome?.trailers)
    }

    /// The client's head as planned, or (refused before planning) as NIO parsed it.
    private var clientHeadOrParsed: RequestHead {
        clientHead ?? RequestHead(
            method: head.method.rawValue,
            url: ProxyURL(scheme: "http", host: head.headers.first(name: "host") ?? "-", path: head.uri),
            version: HTTPVersionNumber(head.version), headers: HeaderFields(head.headers))
    }
}
