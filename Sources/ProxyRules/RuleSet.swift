import ProxyModel

/// An immutable, validated snapshot of every loaded rule. A flow takes one snapshot and keeps it to its end.
public final class RuleSet: Sendable {
    public static let empty = RuleSet()

    /// Number of rules and of files they came from.
    public let ruleCount: Int
    public let fileCount: Int

    public init() {
        self.ruleCount = 0
        self.fileCount = 0
    }

    /// Matches the request as the client sent it against every rule and returns the plan.
    public func plan(for request: RequestHead) -> FlowPlan {
        FlowPlan(upstreamURL: request.url)
    }

    /// The `intercept` decision of the first matching rule that sets it for a CONNECT to host:port; nil when none.
    public func intercept(host: String, port: Int) -> Bool? { nil }
}
