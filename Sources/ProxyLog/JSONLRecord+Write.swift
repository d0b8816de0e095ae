extension JSONLRecord {
    /// Writes the line's object (without newline): the members of `encode(to:)`, in `CodingKeys` order, every one
    /// present (null when unknown).
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("id", id)
        json.field("start", start)
        json.field("client", client)
        json.field("method", method)
        json.field("url", url)
        json.field("upstream_url", upstreamURL)
        json.field("http_version", httpVersion)
        json.field("upstream_http_version", upstreamHTTPVersion)
        json.field("status", status)
        json.field("request_headers", array: requestHeaders) { json, header in header.write(into: &json) }
        json.field("response_headers", array: responseHeaders) { json, header in header.write(into: &json) }
        json.field("request_body_size", requestBodySize)
        json.field("response_body_size", responseBodySize)
        json.field("request_body", requestBody)
        json.field("request_body_encoding", requestBodyEncoding)
        json.field("response_body", responseBody)
        json.field("response_body_encoding", responseBodyEncoding)
        json.key("truncated")
        json.beginObject()
        json.field("request", truncated.request)
        json.field("response", truncated.response)
        json.endObject()
        json.key("timings")
        json.beginObject()
        json.field("dns", timings.dns)
        json.field("connect", timings.connect)
        json.field("tls", timings.tls)
        json.field("first_byte", timings.firstByte)
        json.field("total", timings.total)
        json.endObject()
        json.field("rules", rules)
        json.field("events", array: events) { json, event in event.write(into: &json) }
        json.field("error", error)
        json.field("hop", hop)
        if let websocket {
            json.key("websocket")
            websocket.write(into: &json)
        }
        json.endObject()
    }
}

extension JSONLRecord.Header {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("name", name)
        json.field("value", value)
        json.endObject()
    }
}
