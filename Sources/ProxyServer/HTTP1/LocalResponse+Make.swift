import ProxyModel
import ProxyRules

extension LocalResponse {
    /// A plain-text answer from hookproxy itself (errors, 407, the onboarding page).
    static func text(_ status: Int, _ body: String, headers extra: [(String, String)] = [], contentType: String = "text/plain; charset=utf-8") -> LocalResponse {
        let bytes = Array(body.utf8)
        var headers: HeaderFields = [("Content-Type", contentType), ("Content-Length", String(bytes.count))]
        for (name, value) in extra { headers.add(name, value) }
        return LocalResponse(head: ResponseHead(status: status, headers: headers), body: bytes)
    }

    /// hookproxy's answer in its own name: status and body from the error, nothing else (but `headers`).
    static func error(_ error: ProxyError, headers: [(String, String)] = []) -> LocalResponse {
        text(error.status, error.responseBody, headers: headers)
    }

    /// The answer as HTTP/1.1 bytes, closing the connection: for a connection that has no HTTP handlers (refused at
    /// accept, over --max-connections).
    func closingHTTP1Bytes() -> String {
        var lines = ["HTTP/1.1 \(head.status) \(head.reason)"]
        for field in head.headers { lines.append("\(field.name): \(field.value)") }
        lines.append("Connection: close")
        return lines.joined(separator: "\r\n") + "\r\n\r\n" + String(decoding: body, as: UTF8.self)
    }
}
