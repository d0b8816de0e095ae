import FoundationEssentials
import ProxyModel

extension RuleParser {
    // MARK: match

    /// The compiled match and the number of `path_regex` groups (nil without a path_regex).
    func parseMatch(_ node: YAMLNode) -> (RuleMatch, Int?)? {
        guard let map = ctx.mapping(node, "match", allowed: Self.matchKeys) else { return nil }
        var match = RuleMatch()
        var groups: Int?
        if let node = map["host"], let hosts = ctx.stringList(node, "match.host") {
            for (host, hostNode) in hosts {
                if host.contains("/") {
                    ctx.error(hostNode, "bad host glob '\(host)': a host glob holds a host name only (match the path with 'path')")
                    continue
                }
                if host.filter({ $0 == ":" }).count == 1 {
                    ctx.error(hostNode, "bad host glob '\(host)': put the port in 'port', not in 'host'")
                    continue
                }
                switch Glob.compile(host, caseInsensitive: true) {
                case .success(let glob): match.hosts.append(glob)
                case .failure(let failure): ctx.error(hostNode, "bad host glob '\(host)': \(failure.reason)")
                }
            }
        }
        if let node = map["scheme"], let schemes = ctx.stringList(node, "match.scheme") {
            for (scheme, schemeNode) in schemes {
                let lowered = scheme.lowercased()
                if lowered == "http" || lowered == "https" { match.schemes.append(lowered) }
                else { ctx.error(schemeNode, "'match.scheme' must be http or https, found '\(scheme)'") }
            }
        }
        if let node = map["port"] {
            let items: [YAMLNode] = if case .sequence(let seq) = node { Array(seq) } else { [node] }
            for item in items {
                if let port = ctx.int(item, "match.port", range: 1...65535) { match.ports.append(port) }
            }
        }
        if let node = map["method"], let methods = ctx.stringList(node, "match.method") {
            for (method, methodNode) in methods {
                guard HTTPToken.isToken(method) else {
                    ctx.error(methodNode, "'\(method)' is not an HTTP method")
                    continue
                }
                if method != method.uppercased() {
                    ctx.warning(methodNode, "methods match case-sensitively: '\(method)' does not match '\(method.uppercased())'")
                }
                match.methods.append(method)
            }
        }
        if map.has("path") && map.has("path_regex") {
            ctx.error(map.keyNode("path_regex"), "'path' and 'path_regex' exclude each other; use one")
        }
        if let node = map["path"], let path = ctx.string(node, "match.path") {
            if !(path.hasPrefix("/") || path.hasPrefix("*") || path.hasPrefix("?")) {
                ctx.error(node, "bad path glob '\(path)': a path starts with '/' (the query is matched with 'query')")
            } else if path.contains("?") && path.contains("=") {
                ctx.error(node, "bad path glob '\(path)': the path is matched without its query; use 'query: {name: value}'")
            } else {
                switch Glob.compile(path, caseInsensitive: false) {
                case .success(let glob): match.path = glob
                case .failure(let failure): ctx.error(node, "bad path glob '\(path)': \(failure.reason)")
                }
            }
        }
        if let node = map["path_regex"], let pattern = ctx.string(node, "match.path_regex") {
            switch CompiledRegex.compile(pattern) {
            case .success(let regex):
                match.pathRegex = regex
                groups = regex.groupCount
            case .failure(let failure): ctx.error(node, "bad regex '\(pattern)': \(failure.reason)")
            }
        }
        if let node = map["query"], let pairs = ctx.stringMap(node, "match.query") {
            for pair in pairs {
                switch Glob.compile(pair.value, caseInsensitive: false) {
                case .success(let glob): match.query.append((pair.key, glob))
                case .failure(let failure):
                    if pair.value.isEmpty { match.query.append((pair.key, Glob.emptyValue)) }
                    else { ctx.error(pair.valueNode, "bad glob '\(pair.value)': \(failure.reason)") }
                }
            }
        }
        if let node = map["header"], let pairs = ctx.stringMap(node, "match.header") {
            for pair in pairs {
                guard HTTPToken.isToken(pair.key) else {
                    ctx.error(pair.keyNode, "'\(pair.key)' is not a valid header name")
                    continue
                }
                switch Glob.compile(pair.value, caseInsensitive: false) {
                case .success(let glob): match.headers.append((pair.key, glob))
                case .failure(let failure):
                    if pair.value.isEmpty { match.headers.append((pair.key, Glob.emptyValue)) }
                    else { ctx.error(pair.valueNode, "bad glob '\(pair.value)': \(failure.reason)") }
                }
            }
        }
        if let node = map["websocket"] { match.websocket = ctx.bool(node, "match.websocket") }
        return (match, groups)
    }
}
