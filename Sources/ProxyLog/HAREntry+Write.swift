extension HAREntry {
    /// Writes the entry's object: the members of the `Encodable` conformance, in declaration order; optional members
    /// of the HAR objects are left out when nil, `_hookproxy`'s `upstream_url` and `error` are null.
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("startedDateTime", startedDateTime)
        json.field("time", time)
        json.key("request")
        request.write(into: &json)
        json.key("response")
        response.write(into: &json)
        json.key("cache")
        json.beginObject()
        json.endObject()
        json.key("timings")
        timings.write(into: &json)
        if let serverIPAddress { json.field("serverIPAddress", serverIPAddress) }
        if let connection { json.field("connection", connection) }
        json.key("_hookproxy")
        hookproxy.write(into: &json)
        if let resourceType { json.field("_resourceType", resourceType) }
        if let webSocketMessages {
            json.field("_webSocketMessages", array: webSocketMessages) { json, message in message.writeHAR(into: &json) }
        }
        json.endObject()
    }
}

extension HAREntry.Request {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("method", method)
        json.field("url", url)
        json.field("httpVersion", httpVersion)
        json.field("cookies", array: cookies) { json, cookie in cookie.write(into: &json) }
        json.field("headers", array: headers) { json, header in header.write(into: &json) }
        json.field("queryString", array: queryString) { json, pair in pair.write(into: &json) }
        if let postData {
            json.key("postData")
            postData.write(into: &json)
        }
        json.field("headersSize", headersSize)
        json.field("bodySize", bodySize)
        json.endObject()
    }
}

extension HAREntry.Response {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("status", status)
        json.field("statusText", statusText)
        json.field("httpVersion", httpVersion)
        json.field("cookies", array: cookies) { json, cookie in cookie.write(into: &json) }
        json.field("headers", array: headers) { json, header in header.write(into: &json) }
        json.key("content")
        json.beginObject()
        json.field("size", content.size)
        json.field("mimeType", content.mimeType)
        if let text = content.text { json.field("text", text) }
        if let encoding = content.encoding { json.field("encoding", encoding) }
        if let comment = content.comment { json.field("comment", comment) }
        json.endObject()
        json.field("redirectURL", redirectURL)
        json.field("headersSize", headersSize)
        json.field("bodySize", bodySize)
        json.endObject()
    }
}

extension HAREntry.PostData {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("mimeType", mimeType)
        json.field("params", array: params) { json, param in param.write(into: &json) }
        json.field("text", text)
        if let encoding { json.field("_encoding", encoding) }
        if let comment { json.field("comment", comment) }
        json.endObject()
    }
}

extension HAREntry.NameValue {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("name", name)
        json.field("value", value)
        json.endObject()
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

extension HAREntry.Extra {
    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("id", id)
        json.field("client", client)
        json.field("rules", rules)
        json.field("events", array: events) { json, event in event.write(into: &json) }
        json.field("upstream_url", upstreamURL)
        json.field("hop", hop)
        json.key("truncated")
        json.beginObject()
        json.field("request", truncated.request)
        json.field("response", truncated.response)
        json.endObject()
        json.field("error", error)
        json.endObject()
    }
}
