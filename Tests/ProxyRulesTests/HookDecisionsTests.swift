import ProxyModel
import Testing
@testable import ProxyRules

/// `RedirectFollower` and `HookDecisions` alone: values in, decisions out, no exchange and no socket.
@Suite struct HookDecisionsTests {
    static let origin = ProxyURL(scheme: "http", host: "a.test", path: "/start")

    static func request(_ method: String = "GET", headers: HeaderFields = []) -> RequestHead {
        RequestHead(method: method, url: origin, headers: headers)
    }

    static func context(_ request: RequestHead, redirect: RedirectPolicy? = nil, challenge: ChallengePolicy? = nil,
                        canReplay: Bool = true) -> HookDecisions.Context {
        var plan = FlowPlan(upstreamURL: request.url)
        plan.onChallenge = challenge
        let follower = redirect.flatMap { $0.action == .follow ? RedirectFollower(policy: $0, original: request) : nil }
        return .init(request: request, hopPlan: plan, redirectPolicy: redirect, follower: follower,
                     canReplayBody: canReplay, bodyLimit: 100)
    }

    static func redirect(_ status: Int, to location: String) -> ResponseHead {
        ResponseHead(status: status, headers: [("Location", location)])
    }

    // MARK: RedirectFollower

    @Test func seeOtherTurnsAPostIntoABodilessGet() {
        let post = Self.request("POST", headers: [("Content-Length", "3"), ("Content-Type", "text/plain")])
        var follower = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: post)
        guard case .follow(let next, let bodyKept) = follower.next(after: post, status: 303, location: "/done") else {
            Issue.record("not followed"); return
        }
        #expect(next.method == "GET" && !bodyKept)
        #expect(next.url.description == "http://a.test/done")
        #expect(next.headers["content-length"] == nil && next.headers["content-type"] == nil)
        #expect(follower.hops == 1)
    }

    @Test func temporaryRedirectKeepsMethodAndBody() {
        let post = Self.request("POST", headers: [("Content-Length", "3")])
        var follower = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: post)
        #expect(follower.next(after: post, status: 307, location: "again") ==
            .follow(RequestHead(method: "POST", url: ProxyURL(scheme: "http", host: "a.test", path: "/again"),
                                headers: [("Content-Length", "3"), ("Host", "a.test")]), bodyKept: true))
    }

    @Test func anotherOriginGetsNoCredentials() {
        let get = Self.request(headers: [("Authorization", "Basic x"), ("Cookie", "a=b")])
        var follower = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: get)
        guard case .follow(let next, _) = follower.next(after: get, status: 302, location: "https://b.test/") else {
            Issue.record("not followed"); return
        }
        #expect(next.headers["authorization"] == nil && next.headers["cookie"] == nil)
        #expect(next.headers["host"] == "b.test")
    }

    @Test func loopsAndTooManyHopsFail() {
        let get = Self.request()
        var looping = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: get)
        guard case .fail(let loop) = looping.next(after: get, status: 302, location: "/start") else {
            Issue.record("loop followed"); return
        }
        #expect(loop.kind == .redirectLimit && loop.message.contains("redirect loop"))

        var short = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow, maxHops: 1), original: get)
        guard case .follow(let second, _) = short.next(after: get, status: 302, location: "/2") else {
            Issue.record("not followed"); return
        }
        guard case .fail(let limit) = short.next(after: second, status: 302, location: "/3") else {
            Issue.record("limit passed"); return
        }
        #expect(limit.message.contains("more than 1 hops"))
    }

    @Test func sameHostOnlyPassesOtherOrigins() {
        let get = Self.request()
        var follower = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow, sameHostOnly: true), original: get)
        #expect(follower.next(after: get, status: 302, location: "http://b.test/") == .pass)
    }

    @Test func locationsResolveAgainstTheRequest() {
        let base = ProxyURL(scheme: "https", host: "a.test", path: "/x/y", query: "q=1")
        #expect(RedirectFollower.resolve("z", against: base)?.description == "https://a.test/x/z")
        #expect(RedirectFollower.resolve("../z", against: base)?.description == "https://a.test/z")
        // RFC 3986 §5.4.1: a reference ending in a dot segment resolves to a directory (a trailing slash).
        #expect(RedirectFollower.resolve("..", against: base)?.description == "https://a.test/")
        #expect(RedirectFollower.resolve(".", against: base)?.description == "https://a.test/x/")
        #expect(RedirectFollower.resolve("?p=2", against: base)?.description == "https://a.test/x/y?p=2")
        #expect(RedirectFollower.resolve("//b.test/w", against: base)?.description == "https://b.test/w")
        #expect(RedirectFollower.resolve("  ", against: base) == nil)
    }

    @Test("a Location with a scheme hookproxy cannot follow is not a path on the current origin",
          arguments: ["file:///etc/passwd", "data:text/plain,hi", "mailto:a@b.test", "javascript:alert(1)",
                      "gopher://a.test:70/_x", "ftp://a.test/f", "http://a.test:99999/x", "https://", "HTTP://"])
    func locationsWithOtherSchemesPass(location: String) {
        let base = ProxyURL(scheme: "https", host: "a.test", path: "/x/y")
        #expect(RedirectFollower.resolve(location, against: base) == nil)
        let get = Self.request()
        var follower = RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: get)
        #expect(follower.next(after: get, status: 302, location: location) == .pass)
        // A colon later in a relative path is no scheme.
        #expect(RedirectFollower.resolve("./a:b", against: base)?.description == "https://a.test/x/a:b")
        #expect(RedirectFollower.resolve("/a:b", against: base)?.description == "https://a.test/a:b")
    }

    // MARK: HookDecisions

    @Test func noPolicyNoDecision() {
        #expect(HookDecisions.onHead(Self.redirect(302, to: "/x"), Self.context(Self.request())) == nil)
        let pass = RedirectPolicy(rule: "r", action: .pass)
        #expect(HookDecisions.onHead(Self.redirect(302, to: "/x"), Self.context(Self.request(), redirect: pass)) == nil)
        // 304 is not a redirect
        let block = RedirectPolicy(rule: "r", action: .block)
        #expect(HookDecisions.onHead(Self.redirect(304, to: "/x"), Self.context(Self.request(), redirect: block)) == nil)
    }

    @Test func blockAnswersWithItsEvent() {
        let block = RedirectPolicy(rule: "no-redirects", action: .block)
        guard case .answer(let error, let event) = HookDecisions.onHead(Self.redirect(302, to: "/x"), Self.context(Self.request(), redirect: block)) else {
            Issue.record("not answered"); return
        }
        #expect(error.kind == .redirectBlocked && error.message.contains("[rule no-redirects]"))
        #expect(event?.action == "redirect blocked")
    }

    @Test func rewriteChangesTheLocation() {
        let rewrite = RedirectPolicy(rule: "r", action: .rewrite, rewrite: .init(from: "http://a.test/", to: "http://local/"))
        guard case .passRewritten(let head, _) = HookDecisions.onHead(Self.redirect(302, to: "/x"), Self.context(Self.request(), redirect: rewrite)) else {
            Issue.record("not rewritten"); return
        }
        #expect(head.headers["location"] == "http://local/x")
    }

    @Test func followReturnsTheAdvancedFollowerAndLeavesTheInputAlone() {
        let context = Self.context(Self.request(), redirect: RedirectPolicy(rule: "r", action: .follow))
        guard case .follow(let next, _, let follower) = HookDecisions.onHead(Self.redirect(302, to: "/x"), context) else {
            Issue.record("not followed"); return
        }
        #expect(next.url.path == "/x")
        #expect(follower.hops == 1)
        #expect(context.follower?.hops == 0)  // a pure function: the caller decides whether to keep the new follower
    }

    @Test func aBodyThatCannotBeReplayedStopsA307() {
        let context = Self.context(Self.request("POST"), redirect: RedirectPolicy(rule: "r", action: .follow), canReplay: false)
        guard case .answer(let error, nil) = HookDecisions.onHead(Self.redirect(307, to: "/x"), context) else {
            Issue.record("not answered"); return
        }
        #expect(error.kind == .bodyTooLarge && error.message.contains("--body-limit (100 bytes)"))
        // a 303 drops the body, so it can be followed
        guard case .follow = HookDecisions.onHead(Self.redirect(303, to: "/x"), context) else {
            Issue.record("303 not followed"); return
        }
    }

    @Test func challengeCancelAnswersWithTheOfferedScheme() {
        let cancel = ChallengePolicy(rule: "no-auth", action: .cancel)
        let head = ResponseHead(status: 401, headers: [("WWW-Authenticate", "Basic realm=x")])
        guard case .answer(let error, let event) = HookDecisions.onHead(head, Self.context(Self.request(), challenge: cancel)) else {
            Issue.record("not answered"); return
        }
        #expect(error.kind == .challengeCancelled && error.message.contains("401 Basic realm=x [rule no-auth]"))
        #expect(event?.detail == "Basic realm=x")
    }
}
