import FoundationEssentials
import ProxyLog
import ProxyModel

/// The viewer's routes: the page and its files, and the JSON API under `/api/` (see `Assets/openapi.json`).
///
/// Pure apart from the store it reads (and `POST /api/clear`); the caller has already checked the Host, the
/// credentials and the Origin (`ViewerGate` in ProxyServer). Runs on the event loop of the request: every answer
/// is built from the store's memory, with no I/O (a HAR download only takes the ids of the flows it will cover).
public struct ViewerAPI: Sendable {
    public let store: FlowStore
    public let redactor: Redactor
    public let version: String
    /// `index.html` with the version filled in.
    private let page: [UInt8]

    public init(store: FlowStore, redactor: Redactor = Redactor(), version: String) {
        self.store = store
        self.redactor = redactor
        self.version = version
        let escaped = version.filter { $0.isLetter || $0.isNumber || ".-+_ ".contains($0) }
        page = Array(String(decoding: PackageResources.index_html, as: UTF8.self)
            .replacing("{{VERSION}}", with: escaped).utf8)
    }

    /// The answer to `method path?query`.
    public func answer(method: String, path: String, query: String?) -> ViewerAnswer {
        let parameters = QueryParameters(query)
        let isRead = method == "GET" || method == "HEAD"
        if let asset = ViewerAssets.file(at: path) {
            guard isRead else { return notAllowed("GET, HEAD") }
            return .make(200, asset.isPage ? page : asset.bytes, contentType: asset.contentType,
                         extra: asset.isPage ? [ViewerAnswer.pagePolicy] : [])
        }
        guard path.hasPrefix("/api/") else {
            return .make(404, Array("hookproxy: no such page: \(path.prefix(200))\n".utf8), contentType: "text/plain; charset=utf-8")
        }
        let parts = path.dropFirst("/api/".count).split(separator: "/", omittingEmptySubsequences: false)
        switch parts.count {
        case 1 where parts[0] == "clear":
            guard method == "POST" else { return notAllowed("POST") }
            let cleared = store.clear()
            return .json(200, Array("{\"cleared\":\(cleared)}".utf8))
        case 1 where parts[0] == "events":
            guard isRead else { return notAllowed("GET") }
            return .events
        case 1 where parts[0] == "flows":
            guard isRead else { return notAllowed("GET, HEAD") }
            return flows(parameters)
        case 1 where parts[0] == "har":
            guard isRead else { return notAllowed("GET, HEAD") }
            return har(filter: parameters["filter"] ?? "")
        case 2 where parts[0] == "flows", 4 where parts[0] == "flows":
            guard isRead else { return notAllowed("GET, HEAD") }
            guard let id = Int(parts[1]), id > 0, let flow = store.flow(id: id) else {
                return .problem(404, "no flow \(parts[1].prefix(40)) (it may have been cleared, or dropped beyond --ui-flows)")
            }
            let redacted = redactor.redact(flow.record)
            if parts.count == 2 { return .json(200, FlowJSON.object(redacted, state: flow.state)) }
            switch (parts[2], parts[3]) {
            case ("request", "body"): return body(redacted.requestBody, headers: redacted.request.headers)
            case ("response", "body"): return body(redacted.responseBody, headers: redacted.response?.headers ?? [])
            default: return .problem(404, "no such API path: \(path.prefix(200))")
            }
        default:
            return .problem(404, "no such API path: \(path.prefix(200))")
        }
    }

    private func notAllowed(_ allow: String) -> ViewerAnswer {
        .problem(405, "method not allowed here (use \(allow))", extra: [("Allow", allow)])
    }

    /// The longest filter `/api/har` takes.
    static let filterTerms = 64
    static let filterBytes = 4096

    /// `GET /api/flows?after=ID&limit=N&bodies=false`: without `limit`, every flow kept after ID.
    private func flows(_ parameters: QueryParameters) -> ViewerAnswer {
        var after = 0, limit = Int.max, bodies = true
        if let text = parameters["after"] {
            guard let value = Int(text), value >= 0 else { return .problem(400, "after must be a flow id (an integer ≥ 0)") }
            after = value
        }
        if let text = parameters["limit"] {
            guard let value = Int(text), value >= 1 else { return .problem(400, "limit must be an integer ≥ 1") }
            limit = value
        }
        if let text = parameters["bodies"] {
            guard let value = Bool(text) else { return .problem(400, "bodies must be true or false") }
            bodies = value
        }
        // Made a part at a time as the client reads (with bodies, 5000 flows may be gigabytes of JSON).
        let download = FlowDownload(store: store, redactor: redactor, after: after, limit: limit, bodies: bodies)
        return .download(Self.jsonDownloadHead(), download)
    }

    /// `GET /api/har?filter=…`: the finished flows the filter passes, as a HAR 1.2 download made a part at a time
    /// (`FlowDownload`: the flows kept now, each read when its turn comes).
    private func har(filter text: String) -> ViewerAnswer {
        // Each term is tried on every flow, and the API's answers are made one at a time: a review's 15,000-word
        // filter held every other viewer answer for 115 s.
        let filter = FlowFilter(text)
        guard text.utf8.count <= ViewerAPI.filterBytes, filter.terms.count <= ViewerAPI.filterTerms else {
            return .problem(400, "filter too long: at most \(ViewerAPI.filterTerms) terms and \(ViewerAPI.filterBytes) bytes")
        }
        let download = FlowDownload(store: store, redactor: redactor, filter: filter, creatorVersion: version)
        return .download(Self.jsonDownloadHead([("Content-Disposition", "attachment; filename=\"hookproxy.har\"")]), download)
    }

    /// The head of a JSON answer made in parts (`FlowDownload`): no Content-Length.
    private static func jsonDownloadHead(_ extra: [(String, String)] = []) -> ResponseHead {
        var headers: HeaderFields = [("Content-Type", "application/json")]
        for (name, value) in ViewerAnswer.commonHeaders + extra { headers.add(name, value) }
        return ResponseHead(status: 200, headers: headers)
    }

    /// A captured body as it was captured (a prefix when the capture limit cut it), never as a page of the viewer.
    private func body(_ body: CapturedBody?, headers: HeaderFields) -> ViewerAnswer {
        let type = headers["content-type"].flatMap { $0.isEmpty ? nil : $0 } ?? "application/octet-stream"
        var extra = [ViewerAnswer.bodyPolicy, ("X-Hookproxy-Truncated", (body?.truncated ?? false) ? "true" : "false")]
        if let encoding = headers["content-encoding"] { extra.append(("X-Hookproxy-Content-Encoding", encoding)) }
        return .make(200, body?.bytes ?? [], contentType: ViewerAPI.safeHeaderValue(type), extra: extra)
    }

    /// A header value that can be written back (no control characters).
    static func safeHeaderValue(_ value: String) -> String {
        value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) ? value : "application/octet-stream"
    }
}
