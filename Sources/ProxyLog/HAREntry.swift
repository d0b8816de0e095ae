import FoundationEssentials
import ProxyModel

/// One HAR 1.2 entry (http://www.softwareishard.com/blog/har-12-spec/), built from an already redacted record.
/// Unknown timings are -1 as the spec asks; hookproxy's own data is under `_hookproxy`.
struct HAREntry: Encodable {
    struct NameValue: Encodable { var name: String; var value: String }
    struct Cookie: Encodable {
        var name: String
        var value: String
        var path: String?
        var domain: String?
        var httpOnly: Bool?
        var secure: Bool?
    }
    struct PostData: Encodable {
        var mimeType: String
        var params: [NameValue] = []
        var text: LoggedText
        var encoding: String?
        var comment: String?
        enum CodingKeys: String, CodingKey { case mimeType, params, text, encoding = "_encoding", comment }
    }
    struct Request: Encodable {
        var method: String
        var url: String
        var httpVersion: String
        var cookies: [Cookie]
        var headers: [NameValue]
        var queryString: [NameValue]
        var postData: PostData?
        var headersSize = -1
        var bodySize: Int
    }
    struct Content: Encodable {
        var size: Int
        var mimeType: String
        var text: LoggedText?
        var encoding: String?
        var comment: String?
    }
    struct Response: Encodable {
        var status: Int
        var statusText: String
        var httpVersion: String
        var cookies: [Cookie]
        var headers: [NameValue]
        var content: Content
        var redirectURL: String
        var headersSize = -1
        var bodySize: Int
    }
    struct Cache: Encodable {}
    struct Timings: Encodable {
        var blocked: Double = -1
        var dns: Double = -1
        var connect: Double = -1
        var send: Double = 0
        var wait: Double = 0
        var receive: Double = 0
        var ssl: Double = -1
    }
    struct Extra: Encodable {
        struct Truncated: Encodable { var request: Bool; var response: Bool }
        var id: Int
        var client: String
        var rules: [String]
        var events: [LogEvent]
        var upstreamURL: String?
        var hop: Int
        var truncated: Truncated
        var error: String?
        /// Present only when the response had trailer fields (HAR 1.2 has no place for them).
        var responseTrailers: [NameValue]?
        enum CodingKeys: String, CodingKey {
            case id, client, rules, events, upstreamURL = "upstream_url", hop, truncated, error
            case responseTrailers = "response_trailers"
        }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(client, forKey: .client)
            try c.encode(rules, forKey: .rules)
            try c.encode(events, forKey: .events)
            try c.encode(upstreamURL, forKey: .upstreamURL)
            try c.encode(hop, forKey: .hop)
            try c.encode(truncated, forKey: .truncated)
            try c.encode(error, forKey: .error)
            try c.encodeIfPresent(responseTrailers, forKey: .responseTrailers)
        }
    }

    var startedDateTime: String
    var time: Double
    var request: Request
    var response: Response
    var cache = Cache()
    var timings: Timings
    var serverIPAddress: String?
    var connection: String?
    var hookproxy: Extra
    /// `websocket` for a WebSocket session (Chromium's `_resourceType`), with its messages.
    var resourceType: String?
    var webSocketMessages: [WebSocketMessageJSON]?

    enum CodingKeys: String, CodingKey {
        case startedDateTime, time, request, response, cache, timings, serverIPAddress, connection
        case hookproxy = "_hookproxy"
        case resourceType = "_resourceType", webSocketMessages = "_webSocketMessages"
    }

    /// The entry of an already redacted record. The log files do not build it: `JSONWriter.harEntry` writes the same
    /// members straight from the record (LogJSONMatchesEncoderTests holds the two to the same bytes).
    init(_ flow: FlowRecord) {
        startedDateTime = Timestamp.iso8601(flow.start)
        let requestHeaders = flow.request.headers
        var postData: PostData?
        if let body = flow.requestBodyText {
            postData = PostData(
                mimeType: HAREntry.postMimeType(requestHeaders), text: body.logged,
                encoding: body.encoding == .base64 ? "base64" : nil,
                comment: HAREntry.captureComment(flow.requestBody, size: flow.requestBodySize))
        }
        var query: [NameValue] = []
        HAREntry.forEachQueryPair(of: flow.url) { name, value in query.append(NameValue(name: name, value: value)) }
        request = Request(
            method: flow.request.method, url: flow.url, httpVersion: flow.request.version.description,
            cookies: HAREntry.requestCookies(requestHeaders), headers: HAREntry.nameValues(requestHeaders),
            queryString: query, postData: postData, bodySize: flow.requestBodySize)

        if let head = flow.response {
            var content = Content(size: flow.responseBodySize, mimeType: HAREntry.contentMimeType(head.headers))
            if let body = flow.responseBodyText {
                content.text = body.logged
                content.encoding = body.encoding == .base64 ? "base64" : nil
                content.comment = HAREntry.captureComment(flow.responseBody, size: flow.responseBodySize)
            }
            response = Response(
                status: head.status, statusText: head.reason, httpVersion: flow.request.version.description,
                cookies: HAREntry.responseCookies(head.headers), headers: HAREntry.nameValues(head.headers),
                content: content, redirectURL: HAREntry.redirectURL(head.headers), bodySize: flow.responseBodySize)
        } else {
            // No response (the exchange failed): the form browsers' devtools use for failed requests.
            response = Response(
                status: 0, statusText: "", httpVersion: "", cookies: [], headers: [],
                content: Content(size: 0, mimeType: HAREntry.unknownMimeType), redirectURL: "", bodySize: -1)
        }

        (timings, time) = HAREntry.timings(flow.timings, durationMs: flow.durationMs)
        serverIPAddress = flow.serverIP
        connection = flow.connectionID
        if let session = flow.webSocket, session.isWebSocket {
            resourceType = HAREntry.webSocketResourceType
            webSocketMessages = session.messages.map(WebSocketMessageJSON.init)
        }
        hookproxy = Extra(
            id: flow.id, client: flow.client, rules: flow.rules,
            events: flow.events.map(LogEvent.init),
            upstreamURL: flow.upstreamURL, hop: flow.hop,
            truncated: Extra.Truncated(request: flow.requestBody?.truncated ?? false,
                                       response: flow.responseBody?.truncated ?? false),
            error: flow.error,
            responseTrailers: flow.responseTrailers.map { $0.map { NameValue(name: $0.name, value: $0.value) } })
    }

    // MARK: decisions shared with `JSONWriter.harEntry`

    static let unknownMimeType = "x-unknown"
    static let webSocketResourceType = "websocket"
    static func postMimeType(_ headers: HeaderFields) -> String { headers["Content-Type"] ?? "" }
    static func contentMimeType(_ headers: HeaderFields) -> String { headers["Content-Type"] ?? unknownMimeType }
    static func redirectURL(_ headers: HeaderFields) -> String { headers["Location"] ?? "" }

    /// The note on a body the capture limit cut short, nil for a whole one.
    static func captureComment(_ body: CapturedBody?, size: Int) -> String? {
        guard let body, body.truncated else { return nil }
        return "hookproxy captured the first \(body.bytes.count) of \(size) bytes"
    }

    /// HAR phases from curl's: `connect` includes TLS (as HAR defines it), `wait` is the rest up to the first byte,
    /// `receive` the rest up to the end; `send` is not measured separately (0). `time` is the sum of the known phases.
    /// Without curl timings (local answers, failures before connecting) the whole duration is `wait`.
    static func timings(_ t: ProxyModel.Timings, durationMs: Double) -> (Timings, Double) {
        var result = Timings()
        guard let total = t.total ?? t.firstByte else {
            result.wait = ms(max(0, durationMs))
            return (result, result.wait)
        }
        let dns = max(0, t.dns ?? 0), connect = max(0, t.connect ?? 0), tls = max(0, t.tls ?? 0)
        if let value = t.dns { result.dns = ms(max(0, value)) }
        if t.connect != nil || t.tls != nil { result.connect = ms(connect + tls) }
        if let value = t.tls { result.ssl = ms(max(0, value)) }
        let firstByte = t.firstByte ?? total
        result.wait = ms(max(0, firstByte - dns - connect - tls))
        result.receive = ms(max(0, total - max(firstByte, dns + connect + tls)))
        let time = max(0, result.dns) + max(0, result.connect) + result.send + result.wait + result.receive
        return (result, ms(time))
    }

    static func nameValues(_ headers: HeaderFields) -> [NameValue] {
        headers.map { NameValue(name: $0.name, value: $0.value) }
    }

    /// The `queryString` pairs of a URL, names and values as they appear in it (a redacted value reads `<redacted>`).
    static func forEachQueryPair(of url: String, _ body: (String, String) -> Void) {
        // Byte searches (every absolute URL is scanned here): Character search costs ~100 instructions a character.
        guard let question = url.utf8.firstIndex(of: UInt8(ascii: "?")) else { return }
        var query = url[url.utf8.index(after: question)...]
        if let hash = query.utf8.firstIndex(of: UInt8(ascii: "#")) { query = query[..<hash] }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            body(String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    static func requestCookies(_ headers: HeaderFields) -> [Cookie] {
        headers.values(for: "Cookie").flatMap { line in
            line.split(separator: ";").compactMap { pair -> Cookie? in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = parts[0].trimmingSpaces()
                if name.isEmpty { return nil }
                if line == Redactor.mask { return Cookie(name: Redactor.mask, value: Redactor.mask) }
                return Cookie(name: name, value: parts.count > 1 ? parts[1].trimmingSpaces() : "")
            }
        }
    }

    static func responseCookies(_ headers: HeaderFields) -> [Cookie] {
        headers.values(for: "Set-Cookie").compactMap { line in
            if line == Redactor.mask { return Cookie(name: Redactor.mask, value: Redactor.mask) }
            let attributes = line.split(separator: ";").map { $0.trimmingSpaces() }
            guard let first = attributes.first else { return nil }
            let parts = first.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            var cookie = Cookie(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : "")
            for attribute in attributes.dropFirst() {
                let kv = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                switch kv[0].lowercased() {
                case "path": cookie.path = kv.count > 1 ? String(kv[1]) : nil
                case "domain": cookie.domain = kv.count > 1 ? String(kv[1]) : nil
                case "httponly": cookie.httpOnly = true
                case "secure": cookie.secure = true
                default: break
                }
            }
            return cookie
        }
    }
}
