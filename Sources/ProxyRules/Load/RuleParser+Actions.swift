import FoundationEssentials
import ProxyModel

extension RuleParser {
    // MARK: actions

    /// Parses a template and checks its `$N` against the rule's `path_regex`.
    func template(_ node: YAMLNode, _ what: String, groups: Int?) -> URLTemplate? {
        guard let text = ctx.nonEmptyString(node, what) else { return nil }
        let template: URLTemplate
        switch URLTemplate.parse(text) {
        case .success(let parsed): template = parsed
        case .failure(let failure):
            ctx.error(node, "bad template '\(text)' in '\(what)': \(failure.reason)")
            return nil
        }
        guard checkGroups(template.maxGroup, node: node, what: what, groups: groups) else { return nil }
        return template
    }

    func checkGroups(_ used: Int?, node: YAMLNode, what: String, groups: Int?) -> Bool {
        guard let used, used > 0 else { return true }
        guard let groups else {
            ctx.error(node, "'\(what)' uses $\(used) but the rule has no 'match.path_regex' to capture it")
            return false
        }
        if used > groups {
            ctx.error(node, "'\(what)' uses $\(used) but match.path_regex has only \(groups) group\(groups == 1 ? "" : "s")")
            return false
        }
        return true
    }

    func parseMapRemote(_ node: YAMLNode, groups: Int?) -> MapRemote? {
        // `map_remote: "http://…"` is accepted as a short form of `map_remote: {to: …}`.
        let toNode: YAMLNode
        if case .scalar = node { toNode = node } else {
            guard let map = ctx.mapping(node, "map_remote", allowed: Self.mapRemoteKeys) else { return nil }
            guard let to = map["to"] else {
                ctx.error(node, "'map_remote' needs 'to' (a URL template)")
                return nil
            }
            toNode = to
        }
        guard let template = template(toNode, "map_remote.to", groups: groups) else { return nil }
        let source = template.source
        if template.isLiteral {
            guard ProxyURL(string: source) != nil else {
                ctx.error(toNode, "'map_remote.to' must be an http:// or https:// URL, found '\(source)'")
                return nil
            }
        } else if !(source.hasPrefix("http://") || source.hasPrefix("https://") || source.hasPrefix("{scheme}://")
                    || source.hasPrefix("{url}")) {
            ctx.error(toNode, "'map_remote.to' must start with http://, https://, {scheme}:// or {url}, found '\(source)'")
            return nil
        }
        return MapRemote(to: template)
    }

    func status(_ node: YAMLNode?, _ what: String, default value: Int, range: ClosedRange<Int> = 100...599) -> Int? {
        guard let node else { return value }
        return ctx.int(node, what, range: range)
    }

    func parseRespond(_ node: YAMLNode) -> Respond? {
        guard let map = ctx.mapping(node, "respond", allowed: Self.respondKeys) else { return nil }
        let before = ctx.errors.count
        let status = status(map["status"], "respond.status", default: 200)
        var headers = HeaderFields()
        if let node = map["headers"], let pairs = headerPairs(node, "respond.headers") {
            for pair in pairs { headers.add(pair.name, pair.value) }
        }
        var body: [UInt8] = []
        var bodyFile: String?
        if map.has("body") && map.has("body_file") {
            ctx.error(map.keyNode("body_file"), "'body' and 'body_file' exclude each other in 'respond'; use one")
        } else if let node = map["body"], let text = ctx.string(node, "respond.body") {
            body = Array(text.utf8)
            if !headers.contains("Content-Type") { headers.add("Content-Type", "text/plain; charset=utf-8") }
        } else if let node = map["body_file"], let path = ctx.nonEmptyString(node, "respond.body_file") {
            if let bytes = ctx.readReferencedFile(path, key: "body_file", node: node) {
                body = bytes
                bodyFile = path
                if !headers.contains("Content-Type") { headers.add("Content-Type", MediaType.guess(forPath: path)) }
            }
        }
        guard ctx.errors.count == before, let status else { return nil }
        headers.set("Content-Length", String(body.count))
        return Respond(status: status, headers: headers, body: body, bodyFile: bodyFile)
    }

    func parseRedirectClient(_ node: YAMLNode, groups: Int?) -> RedirectClient? {
        guard let map = ctx.mapping(node, "redirect_client", allowed: Self.redirectClientKeys) else { return nil }
        guard let locationNode = map["location"] else {
            ctx.error(node, "'redirect_client' needs 'location' (a URL template)")
            return nil
        }
        let status = status(map["status"], "redirect_client.status", default: 302, range: 300...399)
        guard let location = template(locationNode, "redirect_client.location", groups: groups), let status else {
            return nil
        }
        guard HeaderValidation.isValue(location.source) else {
            ctx.error(locationNode, "'redirect_client.location' holds a line break or control character")
            return nil
        }
        return RedirectClient(status: status, location: location)
    }

    func headerPairs(_ node: YAMLNode, _ what: String) -> [HeaderField]? {
        guard let pairs = ctx.stringMap(node, what) else { return nil }
        var result: [HeaderField] = []
        for pair in pairs {
            guard HTTPToken.isToken(pair.key) else {
                ctx.error(pair.keyNode, "'\(pair.key)' is not a valid header name")
                continue
            }
            guard HeaderValidation.isValue(pair.value) else {
                ctx.error(pair.valueNode, "the value of header '\(pair.key)' holds a line break or control character")
                continue
            }
            result.append(HeaderField(name: pair.key, value: pair.value))
        }
        return result
    }
}
