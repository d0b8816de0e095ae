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

    static func error(_ error: ProxyError) -> LocalResponse {
        text(error.status, error.responseBody)
    }
}
