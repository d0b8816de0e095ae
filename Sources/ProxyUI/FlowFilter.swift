import ProxyModel

/// The viewer's filter language, shared by the page (`app.js` holds the same rules) and `/api/har?filter=`.
///
/// Words separated by spaces, all of which must hold; a leading `-` negates a word:
/// - `host:TEXT` the URL's host contains TEXT; `method:GET` (or a bare upper-case method such as `POST`);
/// - `status:4xx`, `status:404` (or bare `4xx`, `404`); `rule:NAME` a rule of that name fired;
/// - `hook:trust` (`redirect`, `challenge`, any hook name) an event of that hook; `error` the exchange failed;
/// - anything else: text the URL (or the error) contains. Every comparison ignores case.
/// A value type, usable from any thread.
public struct FlowFilter: Sendable, Equatable {
    public enum Term: Sendable, Equatable {
        case text(String), host(String), method(String), status(low: Int, high: Int), rule(String), hook(String), error
    }

    public var terms: [(term: Term, negated: Bool)] { zip(kinds, negations).map { ($0, $1) } }
    private var kinds: [Term] = []
    private var negations: [Bool] = []

    static let methods: Set<String> = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE"]

    public init(_ text: String) {
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }) {
            var word = Substring(word)
            var negated = false
            if word.hasPrefix("-"), word.count > 1 {
                negated = true
                word = word.dropFirst()
            }
            kinds.append(FlowFilter.term(String(word)))
            negations.append(negated)
        }
    }

    public var isEmpty: Bool { kinds.isEmpty }

    static func term(_ word: String) -> Term {
        let lower = word.lowercased()
        if let colon = lower.firstIndex(of: ":") {
            let key = lower[..<colon], value = String(lower[lower.index(after: colon)...])
            if !value.isEmpty {
                switch key {
                case "host": return .host(value)
                case "method": return .method(value.uppercased())
                case "rule": return .rule(value)
                case "hook": return .hook(value)
                case "status": if let range = statusRange(value) { return .status(low: range.0, high: range.1) }
                default: break
                }
            }
        }
        if lower == "error" { return .error }
        if let range = statusRange(lower) { return .status(low: range.0, high: range.1) }
        if methods.contains(word) { return .method(word) }
        return .text(lower)
    }

    /// `404` → 404…404; `4xx` → 400…499.
    static func statusRange(_ text: String) -> (Int, Int)? {
        let chars = Array(text)
        guard chars.count == 3, let first = chars[0].wholeNumberValue, (1...5).contains(first) else { return nil }
        if chars[1] == "x" && chars[2] == "x" { return (first * 100, first * 100 + 99) }
        guard let value = Int(text) else { return nil }
        return (value, value)
    }

    /// Whether a flow (as the API shows it: redacted) passes every word.
    public func matches(_ flow: FlowRecord) -> Bool {
        for (term, negated) in zip(kinds, negations) where FlowFilter.holds(term, flow) == negated { return false }
        return true
    }

    static func holds(_ term: Term, _ flow: FlowRecord) -> Bool {
        switch term {
        case .text(let text):
            return flow.url.lowercased().contains(text) || (flow.error?.lowercased().contains(text) ?? false)
        case .host(let host):
            return (ProxyURL(string: flow.url)?.host ?? flow.request.url.host).lowercased().contains(host)
        case .method(let method):
            return flow.request.method.uppercased() == method
        case .status(let low, let high):
            guard let status = flow.response?.status else { return false }
            return (low...high).contains(status)
        case .rule(let name):
            return flow.rules.contains { $0.lowercased() == name }
        case .hook(let hook):
            return flow.events.contains { $0.hook.rawValue == hook }
        case .error:
            return flow.error != nil
        }
    }

    public static func == (lhs: FlowFilter, rhs: FlowFilter) -> Bool {
        lhs.kinds == rhs.kinds && lhs.negations == rhs.negations
    }
}
