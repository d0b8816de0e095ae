import FoundationEssentials
import ProxyModel

/// One line of `--jsonl`: exactly these keys, every one present (null when unknown), in this order.
struct JSONLRecord: Encodable {
    struct Header: Encodable { var name: String; var value: String }
    struct Truncated: Encodable { var request: Bool; var response: Bool }
    struct PhaseTimings: Encodable {
        var dns, connect, tls, firstByte, total: Double?
        enum CodingKeys: String, CodingKey { case dns, connect, tls, firstByte = "first_byte", total }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(dns, forKey: .dns)
            try c.encode(connect, forKey: .connect)
            try c.encode(tls, forKey: .tls)
            try c.encode(firstByte, forKey: .firstByte)
            try c.encode(total, forKey: .total)
        }
    }

    var id: Int
    var start: String
    var client: String
    var method: String
    var url: String
    var upstreamURL: String?
    /// The client side's version; `upstreamHTTPVersion` is the upstream response's (nil without one).
    var httpVersion: String
    var upstreamHTTPVersion: String?
    var status: Int?
    var requestHeaders: [Header]
    var responseHeaders: [Header]
    var requestBodySize: Int
    var responseBodySize: Int
    var requestBody: LoggedText?
    var requestBodyEncoding: String?
    var responseBody: LoggedText?
    var responseBodyEncoding: String?
    var truncated: Truncated
    var timings: PhaseTimings
    var rules: [String]
    var events: [LogEvent]
    var error: String?
    var hop: Int
    /// Present only when the response had trailer fields.
    var responseTrailers: [Header]?
    /// Present only for an upgraded exchange (WebSocket session or raw relay).
    var websocket: WebSocketJSON?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, start, client, method, url
        case upstreamURL = "upstream_url", httpVersion = "http_version"
        case upstreamHTTPVersion = "upstream_http_version", status
        case requestHeaders = "request_headers", responseHeaders = "response_headers"
        case requestBodySize = "request_body_size", responseBodySize = "response_body_size"
        case requestBody = "request_body", requestBodyEncoding = "request_body_encoding"
        case responseBody = "response_body", responseBodyEncoding = "response_body_encoding"
        case truncated, timings, rules, events, error, hop, responseTrailers = "response_trailers", websocket
    }

    /// The line of an already redacted record. The log files do not build it: `JSONWriter.jsonlRecord` writes the
    /// same members straight from the record (LogJSONMatchesEncoderTests holds the two to the same bytes).
    init(_ flow: FlowRecord) {
        id = flow.id
        start = Timestamp.iso8601(flow.start)
        client = flow.client
        method = flow.request.method
        url = flow.url
        upstreamURL = flow.upstreamURL
        httpVersion = flow.request.version.description
        upstreamHTTPVersion = JSONLRecord.upstreamHTTPVersion(flow)
        status = flow.response?.status
        requestHeaders = flow.request.headers.map { Header(name: $0.name, value: $0.value) }
        responseHeaders = (flow.response?.headers ?? []).map { Header(name: $0.name, value: $0.value) }
        requestBodySize = flow.requestBodySize
        responseBodySize = flow.responseBodySize
        let request = flow.requestBodyText, response = flow.responseBodyText
        requestBody = request?.logged
        requestBodyEncoding = request?.encoding.rawValue
        responseBody = response?.logged
        responseBodyEncoding = response?.encoding.rawValue
        truncated = Truncated(request: flow.requestBody?.truncated ?? false,
                              response: flow.responseBody?.truncated ?? false)
        let t = flow.timings
        timings = PhaseTimings(dns: t.dns.map(ms), connect: t.connect.map(ms), tls: t.tls.map(ms),
                               firstByte: t.firstByte.map(ms), total: t.total.map(ms))
        rules = flow.rules
        events = flow.events.map(LogEvent.init)
        error = flow.error
        hop = flow.hop
        responseTrailers = flow.responseTrailers.map { $0.map { Header(name: $0.name, value: $0.value) } }
        websocket = flow.webSocket.map(WebSocketJSON.init)
    }

    /// The upstream response's version; nil when none came from upstream (a local answer, a failure).
    static func upstreamHTTPVersion(_ flow: FlowRecord) -> String? {
        flow.upstreamURL == nil ? nil : flow.response?.version.description
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(start, forKey: .start)
        try c.encode(client, forKey: .client)
        try c.encode(method, forKey: .method)
        try c.encode(url, forKey: .url)
        try c.encode(upstreamURL, forKey: .upstreamURL)
        try c.encode(httpVersion, forKey: .httpVersion)
        try c.encode(upstreamHTTPVersion, forKey: .upstreamHTTPVersion)
        try c.encode(status, forKey: .status)
        try c.encode(requestHeaders, forKey: .requestHeaders)
        try c.encode(responseHeaders, forKey: .responseHeaders)
        try c.encode(requestBodySize, forKey: .requestBodySize)
        try c.encode(responseBodySize, forKey: .responseBodySize)
        try c.encode(requestBody, forKey: .requestBody)
        try c.encode(requestBodyEncoding, forKey: .requestBodyEncoding)
        try c.encode(responseBody, forKey: .responseBody)
        try c.encode(responseBodyEncoding, forKey: .responseBodyEncoding)
        try c.encode(truncated, forKey: .truncated)
        try c.encode(timings, forKey: .timings)
        try c.encode(rules, forKey: .rules)
        try c.encode(events, forKey: .events)
        try c.encode(error, forKey: .error)
        try c.encode(hop, forKey: .hop)
        try c.encodeIfPresent(responseTrailers, forKey: .responseTrailers)
        try c.encodeIfPresent(websocket, forKey: .websocket)
    }
}

/// Milliseconds rounded to microseconds, so the files do not carry binary-float noise.
func ms(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

extension JSONEncoder {
    /// The encoder the log files were written with before `JSONWriter`: compact, one line, `/` unescaped. The
    /// reference the tests and the fuzz-logs target hold `JSONWriter`'s output to; the writers do not use it.
    static func logLine() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }
}
