import ProxyModel

extension RuleParser {
    /// `throttle: {down_kbps, up_kbps, latency_ms}` (any non-empty subset; whole numbers, kbps 0 = unlimited), or
    /// the name of a preset as a short form: `throttle: slow-3g`.
    func parseThrottle(_ node: YAMLNode) -> Throttle? {
        if case .scalar = node {
            guard let name = ctx.nonEmptyString(node, "throttle") else { return nil }
            if let preset = Throttle.preset(named: name) { return preset }
            let names = Throttle.presets.map(\.name)
            var message = "unknown throttle preset '\(name)'"
            if let near = Suggest.nearest(to: name, in: names) { message += " — did you mean '\(near)'?" }
            ctx.error(node, message + " (presets: \(names.joined(separator: ", ")); or a mapping of down_kbps, up_kbps, latency_ms)")
            return nil
        }
        let before = ctx.errors.count
        guard let map = ctx.mapping(node, "throttle", allowed: Self.throttleKeys) else { return nil }
        guard !map.entries.isEmpty || ctx.errors.count > before else {
            ctx.error(node, "'throttle' needs at least one of down_kbps, up_kbps, latency_ms")
            return nil
        }
        var throttle = Throttle()
        if let node = map["down_kbps"] { throttle.downKbps = ctx.int(node, "throttle.down_kbps", range: 0...Throttle.maxKbps) }
        if let node = map["up_kbps"] { throttle.upKbps = ctx.int(node, "throttle.up_kbps", range: 0...Throttle.maxKbps) }
        if let node = map["latency_ms"] {
            throttle.latencyMs = ctx.int(node, "throttle.latency_ms", range: 0...Throttle.maxLatencyMs)
        }
        return ctx.errors.count == before ? throttle : nil
    }
}
