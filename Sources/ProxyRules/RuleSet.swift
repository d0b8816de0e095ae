import ProxyModel

/// An immutable, validated snapshot of every loaded rule. A flow takes one snapshot and keeps it to its end.
/// Thread-safe; `plan(for:)` is cheap (precompiled globs and regexes, no allocation beyond the plan).
public final class RuleSet: Sendable {
    public static let empty = RuleSet()

    /// Number of rules and of files they came from.
    public let ruleCount: Int
    public let fileCount: Int
    /// Rule names in file order.
    public let ruleNames: [String]
    /// The rule files read, as shown in messages.
    public let files: [String]
    /// Things allowed but unwise (a literal password…), for `check` and the start-up log.
    public let warnings: [RuleWarning]
    let rules: [Rule]
    /// Each rule's matcher, in rule order.
    private let matchers: [RuleMatcher]
    /// Which effects each rule sets, in rule order.
    private let effects: [Rule.Effects]
    /// Which rules a host can match (literal hosts looked up, the rest tried).
    private let hostIndex: RuleHostIndex
    let interceptRules: [(matcher: RuleMatcher, intercept: Bool)]
    /// Absolute paths of files the rules read (mocks, certificates): a change to them reloads too.
    let dependencies: [String]

    public convenience init() {
        self.init(rules: [], files: [], warnings: [], dependencies: [])
    }

    init(rules: [Rule], files: [String], warnings: [RuleWarning], dependencies: [String]) {
        self.rules = rules
        let matchers = rules.map { RuleMatcher($0.match) }
        self.matchers = matchers
        self.effects = rules.map(\.effects)
        self.hostIndex = RuleHostIndex(rules.map(\.match))
        self.interceptRules = rules.indices.compactMap { index in rules[index].intercept.map { (matchers[index], $0) } }
        self.ruleCount = rules.count
        self.fileCount = files.count
        self.ruleNames = rules.map(\.name)
        self.files = files
        self.warnings = warnings
        self.dependencies = dependencies
    }

    /// `ok: N rules in M files`
    public var summary: String {
        "ok: \(ruleCount) rule\(ruleCount == 1 ? "" : "s") in \(fileCount) file\(fileCount == 1 ? "" : "s")"
    }

    /// Matches the request as the client sent it against every rule and returns the plan.
    ///
    /// Decisions (where the answer comes from — `map_remote`, `respond` or `redirect_client`, which the first
    /// matching rule setting any of them decides —, `on_redirect`, `on_challenge`, `trust`) come from the first
    /// matching rule that sets them; header edits, body transforms and delays of every matching rule apply in
    /// file order. `throttle` is decided per field (`down_kbps`, `up_kbps`, `latency_ms`) by the first matching rule
    /// that sets the field. A local answer comes back in `localResponse` with the response edits already applied.
    public func plan(for request: RequestHead) -> FlowPlan {
        var plan = FlowPlan(upstreamURL: request.url)
        var targetDecided = false
        var requestSteps: [BodyTransformStep] = []
        var responseSteps: [BodyTransformStep] = []
        var toServerSteps: [BodyTransformStep] = []
        var toClientSteps: [BodyTransformStep] = []
        var local: LocalResponse?
        var candidates = hostIndex.candidates(host: request.url.host)
        while let index = candidates.next() {
            let groups: [String]
            switch matchers[index].match(request) {
            case .matched(let found): groups = found
            case .notMatched: continue
            case .overBudget:
                plan.events.append(HookEvent(
                    hook: .rule, action: "rule \(rules[index].name) skipped",
                    detail: "its path_regex /\(matchers[index].pathRegexPattern ?? "")/ needed more than its budget of backtracking steps on this path, so the rule did not match"))
                continue
            }
            // Fields are read from `rules[index]` one by one, and only those the rule sets: a rule copied whole, or
            // a nil field read, costs a copy each.
            let effects = effects[index]
            plan.firedRules.append(rules[index].name)
            if !targetDecided, effects.contains(.target), let target = rules[index].target {
                targetDecided = true
                switch target {
                case .mapRemote(let map):
                    if let url = map.target(for: request.url, groups: groups) {
                        plan.upstreamURL = url
                        plan.mappedBy = rules[index].name
                        plan.events.append(HookEvent(hook: .rule, action: "mapped → \(url)"))
                    } else {
                        plan.events.append(HookEvent(hook: .rule, action: "map_remote skipped",
                                                     detail: "rule \(rules[index].name) produced no http(s) URL; sent unchanged"))
                    }
                case .respond(let respond):
                    local = respond.response()
                    plan.events.append(HookEvent(hook: .rule, action: respond.eventText))
                case .redirectClient(let redirect):
                    let response = redirect.response(for: request.url, groups: groups)
                    local = response
                    let location = response.head.headers["Location"] ?? ""
                    plan.events.append(HookEvent(hook: .rule, action: "redirected client → \(location) (\(redirect.status))"))
                }
            }
            if effects.contains(.requestEdit), let edit = rules[index].requestEdit { plan.requestEdits.append(edit) }
            if effects.contains(.responseEdit), let edit = rules[index].responseEdit { plan.responseEdits.append(edit) }
            if effects.contains(.steps) {
                let rule = rules[index]
                if let step = rule.requestBody { requestSteps.append(step) }
                if let step = rule.responseBody { responseSteps.append(step) }
                if let step = rule.webSocketToServer { toServerSteps.append(step) }
                if let step = rule.webSocketToClient { toClientSteps.append(step) }
            }
            if effects.contains(.pacing) {
                if let delay = rules[index].delayMs { plan.delayMs = min(plan.delayMs + delay, 600_000) }
                if let throttle = rules[index].throttle { plan.throttle = plan.throttle?.filling(from: throttle) ?? throttle }
            }
            if effects.contains(.hooks) {
                if plan.onRedirect == nil { plan.onRedirect = rules[index].onRedirect }
                if plan.onChallenge == nil { plan.onChallenge = rules[index].onChallenge }
                if plan.trust == nil { plan.trust = rules[index].trust }
            }
        }
        if !requestSteps.isEmpty { plan.requestBodyTransform = BodyTransformChain(steps: requestSteps) }
        if !responseSteps.isEmpty { plan.responseBodyTransform = BodyTransformChain(steps: responseSteps) }
        if !toServerSteps.isEmpty { plan.webSocketToServer = BodyTransformChain(steps: toServerSteps) }
        if !toClientSteps.isEmpty { plan.webSocketToClient = BodyTransformChain(steps: toClientSteps) }
        if var local {
            plan.editResponse(&local.head)
            if let transform = plan.responseBodyTransform {
                let (body, notes) = transform.apply(to: local.body, headers: &local.head.headers)
                local.body = body
                plan.events += notes.map { HookEvent(hook: .body, action: $0) }
            }
            plan.localResponse = local
        }
        return plan
    }

    /// The `intercept` decision of the first matching rule that sets it for a CONNECT to host:port; nil when none.
    /// Only `match.host` and `match.port` are considered (a CONNECT has no path, method or headers to match).
    public func intercept(host: String, port: Int) -> Bool? {
        for rule in interceptRules where rule.matcher.matchesHostAndPort(host: host, port: port) {
            return rule.intercept
        }
        return nil
    }
}
