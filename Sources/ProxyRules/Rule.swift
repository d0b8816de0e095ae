import ProxyModel

/// One validated, compiled rule. Immutable.
struct Rule: Sendable {
    /// Where the answer comes from, when the rule decides it. The three keys exclude each other within a rule.
    enum Target: Sendable {
        case mapRemote(MapRemote)
        case respond(Respond)
        case redirectClient(RedirectClient)
    }

    var name: String
    var file: String
    var line: Int
    var match: RuleMatch
    var target: Target?
    var requestEdit: HeaderEdit?
    var requestBody: BodyTransformStep?
    var responseEdit: HeaderEdit?
    var responseBody: BodyTransformStep?
    /// `websocket.to_server` / `to_client`: body steps for a session's text messages.
    var webSocketToServer: BodyTransformStep?
    var webSocketToClient: BodyTransformStep?
    var delayMs: Int?
    var throttle: Throttle?
    var onRedirect: RedirectPolicy?
    var onChallenge: ChallengePolicy?
    var trust: TrustPolicy?
    var intercept: Bool?

    /// Which of the optional effects a rule sets: planning reads only those (reading one out of the rule array
    /// copies it, even when it is nil).
    struct Effects: OptionSet, Sendable {
        let rawValue: UInt16
        static let target = Effects(rawValue: 1 << 0)
        static let requestEdit = Effects(rawValue: 1 << 1)
        static let responseEdit = Effects(rawValue: 1 << 2)
        /// Any body or WebSocket message step.
        static let steps = Effects(rawValue: 1 << 3)
        /// `delay_ms` or `throttle`.
        static let pacing = Effects(rawValue: 1 << 4)
        /// `on_redirect`, `on_challenge` or `trust`.
        static let hooks = Effects(rawValue: 1 << 5)
    }

    var effects: Effects {
        var effects: Effects = []
        if target != nil { effects.insert(.target) }
        if requestEdit != nil { effects.insert(.requestEdit) }
        if responseEdit != nil { effects.insert(.responseEdit) }
        if requestBody != nil || responseBody != nil || webSocketToServer != nil || webSocketToClient != nil {
            effects.insert(.steps)
        }
        if delayMs != nil || throttle != nil { effects.insert(.pacing) }
        if onRedirect != nil || onChallenge != nil || trust != nil { effects.insert(.hooks) }
        return effects
    }
}

/// `respond`: a local answer, built at load (`body_file` is read once; a reload re-reads it).
struct Respond: Sendable {
    var status: Int
    var headers: HeaderFields
    var body: [UInt8]
    /// The `body_file` as written in the rule, for the log line.
    var bodyFile: String?

    func response() -> LocalResponse {
        LocalResponse(head: ResponseHead(status: status, headers: headers), body: body)
    }

    var eventText: String {
        if let bodyFile { return "responded from \(bodyFile)" }
        return "responded \(status)"
    }
}

/// `redirect_client`: answer the client with a 3xx to a templated Location.
struct RedirectClient: Sendable {
    var status: Int
    var location: URLTemplate

    func response(for url: ProxyURL, groups: [String]) -> LocalResponse {
        let location = location.render(url: url, groups: groups)
        let head = ResponseHead(status: status, headers: [("Location", location), ("Content-Length", "0")])
        return LocalResponse(head: head, body: [])
    }
}

/// Content-Type from a mock file's extension.
enum MediaType {
    static func guess(forPath path: String) -> String {
        let ext = path.split(separator: "/").last.flatMap { name -> Substring? in
            guard let dot = name.lastIndex(of: ".") else { return nil }
            return name[name.index(after: dot)...]
        }?.lowercased() ?? ""
        switch ext {
        case "json": return "application/json"
        case "html", "htm": return "text/html; charset=utf-8"
        case "txt", "text": return "text/plain; charset=utf-8"
        case "xml": return "application/xml"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "csv": return "text/csv; charset=utf-8"
        case "yaml", "yml": return "application/yaml"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "ico": return "image/x-icon"
        case "pdf": return "application/pdf"
        case "wasm": return "application/wasm"
        case "woff2": return "font/woff2"
        default: return "application/octet-stream"
        }
    }
}
