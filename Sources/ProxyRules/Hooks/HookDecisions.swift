import ProxyModel

/// The decisions a response head can trigger before the client sees it: `on_redirect` (block, rewrite, follow)
/// and `on_challenge: cancel`. A pure function of the head and what the exchange knows; `nil` means: hand the
/// response on as it is.
public enum HookDecisions {
    public enum Decision: Sendable {
        /// Hand the response on with changed headers (a rewritten Location).
        case passRewritten(ResponseHead, HookEvent)
        /// Drop this 3xx and request `RequestHead` next; `follower` has the new hop counted.
        case follow(RequestHead, bodyKept: Bool, follower: RedirectFollower)
        /// Answer the client with hookproxy's own error response.
        case answer(ProxyError, HookEvent?)
    }

    /// What a response head meets.
    public struct Context: Sendable {
        /// The current hop's request and plan.
        public var request: RequestHead
        public var hopPlan: FlowPlan
        /// The client request's `on_redirect` (it governs the whole followed chain).
        public var redirectPolicy: RedirectPolicy?
        public var follower: RedirectFollower?
        /// Whether a followed redirect could be sent the request body again (false once it outgrew --body-limit).
        public var canReplayBody: Bool
        public var bodyLimit: Int

        public init(request: RequestHead, hopPlan: FlowPlan, redirectPolicy: RedirectPolicy?,
                    follower: RedirectFollower?, canReplayBody: Bool, bodyLimit: Int) {
            self.request = request
            self.hopPlan = hopPlan
            self.redirectPolicy = redirectPolicy
            self.follower = follower
            self.canReplayBody = canReplayBody
            self.bodyLimit = bodyLimit
        }
    }

    public static func onHead(_ head: ResponseHead, _ context: Context) -> Decision? {
        let request = context.request
        if (300..<400).contains(head.status), head.status != 304, let location = head.headers["location"],
           let policy = context.redirectPolicy,
           let decision = onRedirect(head, location: location, policy: policy, context) {
            return decision
        }
        if head.status == 401 || head.status == 407, let challenge = context.hopPlan.onChallenge,
           challenge.action == .cancel {
            let offered = head.headers[head.status == 401 ? "WWW-Authenticate" : "Proxy-Authenticate"] ?? "no scheme offered"
            return .answer(
                ProxyError(.challengeCancelled, "hookproxy: challenge cancelled \(request.url.authority): \(head.status) \(offered) [rule \(challenge.rule)]"),
                HookEvent(hook: .challenge, action: "challenge cancelled", detail: offered))
        }
        return nil
    }

    private static func onRedirect(_ head: ResponseHead, location: String, policy: RedirectPolicy,
                                   _ context: Context) -> Decision? {
        let request = context.request
        let rewritten = policy.rewrite.flatMap { RedirectFollower.rewrite(location, against: request.url, with: $0) }
        switch policy.action {
        case .pass:
            return nil
        case .block:
            return .answer(
                ProxyError(.redirectBlocked, "hookproxy: redirect blocked \(request.url.authority): \(head.status) to \(location) [rule \(policy.rule)]"),
                HookEvent(hook: .redirect, action: "redirect blocked", detail: location))
        case .rewrite:
            guard let rewritten else { return nil }
            var changed = head
            changed.headers.set("Location", rewritten)
            return .passRewritten(changed, HookEvent(hook: .redirect, action: "redirect rewritten", detail: "\(location) → \(rewritten)"))
        case .follow:
            guard var follower = context.follower else { return nil }
            switch follower.next(after: request, status: head.status, location: rewritten ?? location) {
            case .pass:
                return nil
            case .follow(let next, let bodyKept):
                if bodyKept && !context.canReplayBody {
                    return .answer(ProxyError(.bodyTooLarge, "hookproxy: cannot follow the redirect from \(request.url.authority): the request body was larger than --body-limit (\(context.bodyLimit) bytes) and cannot be replayed"), nil)
                }
                return .follow(next, bodyKept: bodyKept, follower: follower)
            case .fail(let error):
                return .answer(error, HookEvent(hook: .redirect, action: "redirect stopped"))
            }
        }
    }
}
