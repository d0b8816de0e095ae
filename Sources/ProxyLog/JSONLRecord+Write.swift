import ProxyModel

extension JSONWriter {
    /// Writes the JSONL line's object (without newline) of an already redacted record straight from the record: the
    /// members of `JSONLRecord.encode(to:)`, in `CodingKeys` order, every one present (null when unknown), with the
    /// same values (LogJSONMatchesEncoderTests holds the two to the same bytes). No `JSONLRecord` is built on the way.
    mutating func jsonlRecord(_ flow: FlowRecord) {
        beginObject()
        field("id", flow.id)
        field("start", Timestamp.iso8601(flow.start))
        field("client", flow.client)
        field("method", flow.request.method)
        field("url", flow.url)
        field("upstream_url", flow.upstreamURL)
        field("http_version", flow.request.version.description)
        field("upstream_http_version", JSONLRecord.upstreamHTTPVersion(flow))
        field("status", flow.response?.status)
        field("request_headers", nameValues: flow.request.headers)
        field("response_headers", nameValues: flow.response?.headers ?? [])
        field("request_body_size", flow.requestBodySize)
        field("response_body_size", flow.responseBodySize)
        let request = flow.requestBodyText, response = flow.responseBodyText
        field("request_body", request?.logged)
        field("request_body_encoding", request?.encoding.rawValue)
        field("response_body", response?.logged)
        field("response_body_encoding", response?.encoding.rawValue)
        key("truncated")
        beginObject()
        field("request", flow.requestBody?.truncated ?? false)
        field("response", flow.responseBody?.truncated ?? false)
        endObject()
        let timings = flow.timings
        key("timings")
        beginObject()
        field("dns", timings.dns.map(ms))
        field("connect", timings.connect.map(ms))
        field("tls", timings.tls.map(ms))
        field("first_byte", timings.firstByte.map(ms))
        field("total", timings.total.map(ms))
        endObject()
        field("rules", flow.rules)
        field("events", array: flow.events) { json, event in LogEvent(event).write(into: &json) }
        field("error", flow.error)
        field("hop", flow.hop)
        if let trailers = flow.responseTrailers { field("response_trailers", nameValues: trailers) }
        if let session = flow.webSocket {
            key("websocket")
            WebSocketJSON(session).write(into: &self)
        }
        endObject()
    }
}
