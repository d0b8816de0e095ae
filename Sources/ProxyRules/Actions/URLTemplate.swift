import ProxyModel

/// A `map_remote.to` / `redirect_client.location` template: text with `{scheme}` `{host}` `{port}` `{path}`
/// `{query}` (without `?`) `{url}` (as the client sent it) and `$N` (groups of `path_regex`; `$$` is a `$`).
struct URLTemplate: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        case text(String)
        case scheme, host, port, path, query, url
        case group(Int)
    }

    static let placeholders = ["scheme", "host", "port", "path", "query", "url"]

    let source: String
    let parts: [Part]

    /// Largest `$N` used, or nil when none.
    var maxGroup: Int? {
        parts.compactMap { if case .group(let n) = $0 { return n } else { return nil } }.max()
    }

    var isLiteral: Bool { parts.allSatisfy { if case .text = $0 { return true } else { return false } } }

    static func parse(_ source: String) -> Result<URLTemplate, TemplateError> {
        var parts: [Part] = []
        var literal = ""
        var chars = source[...]
        func flush() {
            if !literal.isEmpty { parts.append(.text(literal)); literal = "" }
        }
        while let char = chars.popFirst() {
            switch char {
            case "{":
                guard let close = chars.firstIndex(of: "}") else {
                    return .failure(TemplateError(reason: "'{' without a closing '}'"))
                }
                let name = String(chars[..<close])
                chars = chars[chars.index(after: close)...]
                let part: Part
                switch name {
                case "scheme": part = .scheme
                case "host": part = .host
                case "port": part = .port
                case "path": part = .path
                case "query": part = .query
                case "url": part = .url
                default:
                    var reason = "unknown placeholder {\(name)}"
                    if let near = Suggest.nearest(to: name, in: placeholders) { reason += " — did you mean {\(near)}?" }
                    else { reason += " (known: {scheme} {host} {port} {path} {query} {url})" }
                    return .failure(TemplateError(reason: reason))
                }
                flush()
                parts.append(part)
            case "$":
                if chars.first == "$" {
                    chars = chars.dropFirst()
                    literal.append("$")
                    continue
                }
                let digits = chars.prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty, let number = Int(digits), number < 1000 else {
                    literal.append("$")
                    continue
                }
                chars = chars.dropFirst(digits.count)
                flush()
                parts.append(.group(number))
            default:
                literal.append(char)
            }
        }
        flush()
        return .success(URLTemplate(source: source, parts: parts))
    }

    func render(url: ProxyURL, groups: [String]) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .scheme: out += url.scheme
            case .host: out += url.host.contains(":") ? "[\(url.host)]" : url.host
            case .port: out += String(url.port)
            case .path: out += url.path
            case .query: out += url.query ?? ""
            case .url: out += url.description
            case .group(let n): out += n < groups.count ? groups[n] : ""
            }
        }
        return out
    }
}

struct TemplateError: Error {
    var reason: String
}

/// `map_remote`: where the request goes instead. The client never sees the change.
struct MapRemote: Sendable {
    let to: URLTemplate

    /// The new URL; when the rendered URL has no path (e.g. `http://127.0.0.1:9000`) the original path and query
    /// are kept. nil when the result is not an http(s) URL.
    func target(for url: ProxyURL, groups: [String]) -> ProxyURL? {
        let rendered = to.render(url: url, groups: groups)
        guard let mapped = ProxyURL(string: rendered) else { return nil }
        if MapRemote.hasNoPath(rendered) {
            return ProxyURL(scheme: mapped.scheme, host: mapped.host, port: mapped.port, path: url.path, query: url.query)
        }
        return mapped
    }

    static func hasNoPath(_ url: String) -> Bool {
        guard let schemeEnd = url.firstRange(of: "://") else { return false }
        let rest = url[schemeEnd.upperBound...]
        return !rest.contains("/") && !rest.contains("?")
    }
}
