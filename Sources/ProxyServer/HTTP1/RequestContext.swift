import Foundation
import NIOHTTP1
import ProxyModel
import ProxyRules

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

    /// A log record for a request answered without going upstream.
    func record(id: Int, response: ResponseHead, bodySize: Int, events: [HookEvent],
                responseBody: CapturedBody? = nil) -> FlowRecord {
        let requestHead = clientHead ?? RequestHead(
            method: head.method.rawValue,
            url: ProxyURL(scheme: "http", host: head.headers.first(name: "host") ?? "-", path: head.uri),
            version: HTTPVersionNumber(head.version), headers: HeaderFields(head.headers))
        return FlowRecord(
            id: id, start: start, client: client, request: requestHead,
            url: clientHead?.url.description ?? head.uri, response: response, requestBodySize: requestBodySize,
            responseBodySize: bodySize, requestBody: requestBody, responseBody: responseBody, durationMs: Date().timeIntervalSince(start) * 1000, rules: rules, events: events)
    }
}
