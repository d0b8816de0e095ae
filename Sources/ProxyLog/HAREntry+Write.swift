import ProxyModel

extension JSONWriter {
    /// Writes the HAR entry of an already redacted record straight from the record: the members of `HAREntry`'s
    /// `Encodable` conformance, in its declaration order, with the same values (LogJSONMatchesEncoderTests holds the
    /// two to the same bytes). No `HAREntry` is built on the way: its arrays of headers, query pairs and events cost
    /// the log thread ~15 k instructions an exchange. Optional members of the HAR objects are left out when nil;
    /// `_hookproxy`'s `upstream_url` and `error` are null.
    mutating func harEntry(_ flow: FlowRecord) {
        beginObject()
        field("startedDateTime", Timestamp.iso8601(flow.start))
        let (timings, time) = HAREntry.timings(flow.timings, durationMs: flow.durationMs)
        field("time", time)
        key("request")
        harRequest(flow)
        key("response")
        harResponse(flow)
        key("cache")
        beginObject()
        endObject()
        key("timings")
        timings.write(into: &self)
        if let address = flow.serverIP { field("serverIPAddress", address) }
        if let connection = flow.connectionID { field("connection", connection) }
        key("_hookproxy")
        harExtra(flow)
        if let session = flow.webSocket, session.isWebSocket {
            field("_resourceType", HAREntry.webSocketResourceType)
            field("_webSocketMessages", array: session.messages) { json, message in
                WebSocketMessageJSON(message).writeHAR(into: &json)
            }
        }
        endObject()
    }

    private mutating func harRequest(_ flow: FlowRecord) {
        let headers = flow.request.headers
        beginObject()
        field("method", flow.request.method)
        field("url", flow.url)
        field("httpVersion", flow.request.version.description)
        field("cookies", array: HAREntry.requestCookies(headers)) { json, cookie in cookie.write(into: &json) }
        field("headers", nameValues: headers)
        key("queryString")
        beginArray()
        HAREntry.forEachQueryPair(of: flow.url) { name, value in nameValue(name, value) }
        endArray()
        if let body = flow.requestBodyText {
            key("postData")
            beginObject()
            field("mimeType", HAREntry.postMimeType(headers))
            key("params")
            beginArray()
            endArray()
            field("text", body.logged)
            if body.encoding == .base64 { field("_encoding", "base64") }
            if let comment = HAREntry.captureComment(flow.requestBody, size: flow.requestBodySize) {
                field("comment", comment)
            }
            endObject()
        }
        field("headersSize", -1)
        field("bodySize", flow.requestBodySize)
        endObject()
    }

    private mutating func harResponse(_ flow: FlowRecord) {
        beginObject()
        guard let head = flow.response else {
            // No response (the exchange failed): the form browsers' devtools use for failed requests.
            field("status", 0)
            field("statusText", "")
            field("httpVersion", "")
            key("cookies")
            beginArray()
            endArray()
            key("headers")
            beginArray()
            endArray()
            key("content")
            beginObject()
            field("size", 0)
            field("mimeType", HAREntry.unknownMimeType)
            endObject()
            field("redirectURL", "")
            field("headersSize", -1)
            field("bodySize", -1)
            endObject()
            return
        }
        field("status", head.status)
        field("statusText", head.reason)
        field("httpVersion", flow.request.version.description)
        field("cookies", array: HAREntry.responseCookies(head.headers)) { json, cookie in cookie.write(into: &json) }
        field("headers", nameValues: head.headers)
        key("content")
        beginObject()
        field("size", flow.responseBodySize)
        field("mimeType", HAREntry.contentMimeType(head.headers))
        if let body = flow.responseBodyText {
            field("text", body.logged)
            if body.encoding == .base64 { field("encoding", "base64") }
            if let comment = HAREntry.captureComment(flow.responseBody, size: flow.responseBodySize) {
                field("comment", comment)
            }
        }
        endObject()
        field("redirectURL", HAREntry.redirectURL(head.headers))
        field("headersSize", -1)
        field("bodySize", flow.responseBodySize)
        endObject()
    }

    private mutating func harExtra(_ flow: FlowRecord) {
        beginObject()
        field("id", flow.id)
        field("client", flow.client)
        field("rules", flow.rules)
        field("events", array: flow.events) { json, event in LogEvent(event).write(into: &json) }
        field("upstream_url", flow.upstreamURL)
        field("hop", flow.hop)
        key("truncated")
        beginObject()
        field("request", flow.requestBody?.truncated ?? false)
        field("response", flow.responseBody?.truncated ?? false)
        endObject()
        field("error", flow.error)
        if let trailers = flow.responseTrailers { field("response_trailers", nameValues: trailers) }
        endObject()
    }
}

extension HAREntry.Cookie {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("name", name)
        json.field("value", value)
        if let path { json.field("path", path) }
        if let domain { json.field("domain", domain) }
        if let httpOnly { json.field("httpOnly", httpOnly) }
        if let secure { json.field("secure", secure) }
        json.endObject()
    }
}

extension HAREntry.Timings {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("blocked", blocked)
        json.field("dns", dns)
        json.field("connect", connect)
        json.field("send", send)
        json.field("wait", wait)
        json.field("receive", receive)
        json.field("ssl", ssl)
        json.endObject()
    }
}
