import ProxyModel
import ProxyRules

/// The decisions a response head can trigger before the client sees it: `on_redirect` (block, rewrite, follow)
/// and `on_challenge: cancel`. `nil` means: hand the response on as it is.
enum HookDecisions {
    enum Decision {
        /// Hand the response on with changed headers (a rewritten Location).
        case passRewritten(ResponseHead, HookEvent)
        /// Drop this 3xx and request `RequestHead` next.
        case follow(RequestHead, bodyKept: Bool)
        /// Answer the client with hookproxy's own error response.
        case answer(ProxyError, HookEvent)
    }

    static func onHead(_ head: ResponseHead, exchange: Exchange) -> Decision? {
        let (request, hopPlan, _) = exchange.currentHop
        if (300..<400).contains(head.status), head.status != 304, let location = head.headers["location"],
           let policy = exchange.plan.onRedirect {
            if let decision = onRedirect(head, location: location, policy: policy, request: request, exchange: exchange) {
                return decision
            }
        }
        if head.status == 401 || head.status == 407, let challenge = hopPlan.onChallenge, challenge.action == .cancel {
            let offered = head.headers[head.status == 401 ? "WWW-Authenticate" : "Proxy-Authenticate"] ?? "no scheme offered"
            return .answer(
                ProxyError(.challengeCancelled, "hookproxy: challenge cancelled \(request.url.authority): \(head.status) \(offered) [rule \(challenge.rule)]"),
                HookEvent(hook: .challenge, action: "challenge cancelled", detail: offered))
        }
        return nil
    }

    private static func onRedirect(_ head: ResponseHead, location: String, policy: RedirectPolicy, request: RequestHead,
                                   exchange: Exchange) -> Decision? {
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
            switch exchange.nextRedirect(after: head.status, location: rewritten ?? location) {
            case .pass:
                return nil
            case .follow(let next, let bodyKept):
                return .follow(next, bodyKept: bodyKept)
            case .fail(let error):
                return .answer(error, HookEvent(hook: .redirect, action: "redirect stopped"))
            }
        }
    }
}
