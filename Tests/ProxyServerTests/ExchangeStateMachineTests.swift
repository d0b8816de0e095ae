import NIOCore
import ProxyModel
import ProxyRules
import Testing
@testable import ProxyServer

/// The exchange's life as a value: each test feeds inputs and reads the actions back, with no socket or curl.
/// The hardening faults (an early answer that hung, transfers left running, a quadratic buffer) are sequences here.
@Suite struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine

    static func machine(body: Bool = false, transformRequest: Bool = false, transformResponse: Bool = false,
                        keepAlive: Bool = true, http10: Bool = false, limit: Int = 1024,
                        follow: Bool = false) -> Machine {
        let original = RequestHead(method: body ? "POST" : "GET", url: ProxyURL(scheme: "http", host: "a.test"))
        let follower = follow ? RedirectFollower(policy: RedirectPolicy(rule: "r", action: .follow), original: original) : nil
        return Machine(.init(requestHasBody: body, transformsRequest: transformRequest && body,
                             transformsResponse: transformResponse, keepAlive: keepAlive, clientIsHTTP10: http10,
                             bodyLimit: limit), follower: follower)
    }

    static func head(_ status: Int, _ headers: HeaderFields = []) -> ResponseHead {
        ResponseHead(status: status, headers: headers)
    }

    static func bytes(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: 0x61, count: count) }

    static let error = ProxyError(.upstreamClosed, "hookproxy: upstream closed the connection a.test")

    /// A driver that performs no I/O: it writes what the actions say through the machine's write checks, and
    /// returns each action in a short form.
    static func run(_ machine: inout Machine, _ actions: [Machine.Action]) -> [String] {
        actions.map { describe($0, &machine) }
    }

    static func describe(_ action: Machine.Action, _ machine: inout Machine) -> String {
        switch action {
        case .startTransfer(let upload): return "start(\(describe(upload)))"
        case .pushRequestBody(let buffer): return "push(\(buffer.readableBytes))"
        case .endRequestBody: return "endRequest"
        case .transformRequestBody(let kept): return "transformRequest(\(kept.byteCount))"
        case .cancelTransfer: return "cancel"
        case .event(let event): return "event(\(event.action))"
        case .writeHead(var head, _):
            let written = machine.headWillBeWritten(&head, hasBody: true)
            return written ? "head(\(head.status)\(head.headers["connection"].map { ",\($0)" } ?? ""))" : "head(dropped)"
        case .writeBody(let buffer):
            return machine.bodyWillBeWritten(buffer.readableBytes) ? "body(\(buffer.readableBytes))" : "body(dropped)"
        case .streamUnchanged(var head, let kept):
            _ = machine.headWillBeWritten(&head, hasBody: true)
            for chunk in kept { _ = machine.bodyWillBeWritten(chunk.readableBytes) }
            return "streamUnchanged(\(kept.reduce(0) { $0 + $1.readableBytes }))"
        case .transformResponseBody(_, let kept): return "transformResponse(\(kept.byteCount))"
        case .writeError(let error):
            var head = ResponseHead(status: error.status, headers: [("Content-Length", String(error.responseBody.utf8.count))])
            _ = machine.headWillBeWritten(&head, hasBody: true)
            _ = machine.bodyWillBeWritten(error.responseBody.utf8.count)
            return "error(\(error.status)\(head.headers["connection"].map { ",\($0)" } ?? ""))"
        case .startNextHop(let next, let upload): return "nextHop(\(next.method) \(next.url.path), \(describe(upload)))"
        case .record(.final): return "record"
        case .record(.redirect(let head)): return "record(\(head.status))"
        case .closeConnection: return "close"
        case .finishConnection(let close, let endAlreadySent):
            return "finish(\(close ? "close" : "keep-alive")\(endAlreadySent ? ", end sent" : ""))"
        case .endResponseAndDrainRequest: return "endResponse+drainRequest"
        case .drain: return "drain"
        case .several(let actions): return actions.map { describe($0, &machine) }.joined(separator: "+")
        }
    }

    static func describe(_ upload: Machine.Upload) -> String {
        switch upload {
        case .fromClient(let delayed): delayed ? "client, delayed" : "client"
        case .overLimit(let kept): "over limit, \(kept.reduce(0) { $0 + $1.readableBytes }) kept"
        case .transformed: "transformed"
        case .replay(let chunks): "replay \(chunks.reduce(0) { $0 + $1.readableBytes })"
        case .none: "none"
        }
    }

    static func part(_ machine: inout Machine, _ buffer: ByteBuffer) -> String? {
        machine.requestBodyPart(buffer).map { describe($0, &machine) }
    }

    static func upstreamBody(_ machine: inout Machine, _ count: Int) -> String? {
        machine.upstreamBody(bytes(count)).map { describe($0, &machine) }
    }

    static func end(_ machine: inout Machine, _ error: ProxyError? = nil) -> [String] {
        run(&machine, machine.upstreamEnd(error: error, closedEarly: Self.error))
    }

    // MARK: the plain path

    @Test func getWithKeepAlive() {
        var m = Self.machine()
        #expect(Self.run(&m, m.start()) == ["start(client, delayed)"])
        #expect(Self.run(&m, m.requestEnd()) == ["endRequest"])
        #expect(Self.run(&m, m.upstreamHead(Self.head(200, [("Content-Length", "5")]), .pass(hasBody: true))) == ["head(200)"])
        #expect(Self.upstreamBody(&m, 5) == "body(5)")
        #expect(Self.end(&m) == ["record", "finish(keep-alive)"])
        #expect(m.responseComplete && m.requestComplete && m.failure == nil)
        // what curl may still report after the end is ignored
        #expect(Self.upstreamBody(&m, 5) == nil)
        #expect(Self.end(&m).isEmpty)
        #expect(Self.run(&m, m.clientClosed()).isEmpty)
    }

    @Test func uploadStreamsToTheFirstHop() {
        var m = Self.machine(body: true)
        _ = m.start()
        #expect(Self.part(&m, Self.bytes(10)) == "push(10)")
        #expect(Self.part(&m, Self.bytes(20)) == "push(20)")
        #expect(Self.run(&m, m.requestEnd()) == ["endRequest"])
    }

    @Test func connectionCloseIsDecidedOnceAndSaidInTheHead() {
        var closing = Self.machine(keepAlive: false)
        _ = closing.start(); _ = closing.requestEnd()
        #expect(Self.run(&closing, closing.upstreamHead(Self.head(200, [("Content-Length", "0")]), .pass(hasBody: true))) == ["head(200,close)"])
        #expect(Self.end(&closing) == ["record", "finish(close)"])

        // an HTTP/1.0 client and a body without Content-Length: the close ends the body
        var old = Self.machine(http10: true)
        _ = old.start(); _ = old.requestEnd()
        #expect(Self.run(&old, old.upstreamHead(Self.head(200), .pass(hasBody: true))) == ["head(200,close)"])
        #expect(Self.end(&old) == ["record", "finish(close)"])

        var oldWithLength = Self.machine(http10: true)
        _ = oldWithLength.start(); _ = oldWithLength.requestEnd()
        #expect(Self.run(&oldWithLength, oldWithLength.upstreamHead(Self.head(200, [("Content-Length", "0")]), .pass(hasBody: true))) == ["head(200,keep-alive)"])
    }

    // MARK: failures

    @Test func upstreamClosesBeforeTheHead() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        #expect(Self.end(&m, nil) == ["error(502)", "record", "finish(keep-alive)"])
        #expect(m.failure == Self.error.message)
    }

    @Test func upstreamFailsMidBody() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        _ = Self.run(&m, m.upstreamHead(Self.head(200, [("Content-Length", "100")]), .pass(hasBody: true)))
        _ = Self.upstreamBody(&m, 10)
        let timeout = ProxyError(.timeout, "hookproxy: timeout")
        #expect(Self.end(&m, timeout) == ["record", "close"])
        #expect(m.failure == timeout.message)
    }

    @Test func malformedFramingIsNeverForwarded() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        let bad = ProxyError(.upstreamFailed, "hookproxy: bad response")
        #expect(Self.run(&m, m.upstreamHead(Self.head(200), .malformed(bad))) == ["cancel", "error(502)", "record", "finish(keep-alive)"])
        #expect(Self.upstreamBody(&m, 10) == nil)
    }

    @Test func anErrorBeforeTheRequestEndClosesTheConnection() {
        var m = Self.machine(body: true)
        _ = m.start()
        _ = Self.part(&m, Self.bytes(10))
        #expect(Self.end(&m) == ["error(502,close)", "record", "finish(close)"])
        #expect(m.closeAfterResponse)
    }

    // MARK: hardening faults as sequences

    /// Issue 11.5: an upstream that answers an upload early (a 413) — the answer's end goes out and the rest of the
    /// body is read and dropped; the connection is handed back when the body ends, not before, and never hangs.
    @Test func earlyAnswerToAnUpload() {
        var m = Self.machine(body: true)
        _ = m.start()
        _ = Self.part(&m, Self.bytes(10))
        _ = Self.run(&m, m.upstreamHead(Self.head(413, [("Content-Length", "0")]), .pass(hasBody: true)))
        #expect(Self.end(&m) == ["record", "endResponse+drainRequest"])
        #expect(Self.part(&m, Self.bytes(10)) == nil)  // dropped, not pushed to a finished transfer
        #expect(Self.run(&m, m.requestEnd()) == ["endRequest", "finish(keep-alive, end sent)"])
    }

    /// Issue 11.7: a client that leaves mid-response stops the transfer at once, and the log says why.
    @Test func clientLeavingStopsTheTransfer() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        _ = Self.run(&m, m.upstreamHead(Self.head(200, [("Content-Length", "100")]), .pass(hasBody: true)))
        _ = Self.upstreamBody(&m, 10)
        #expect(Self.run(&m, m.clientClosed()) == ["cancel", "record"])
        #expect(m.failure == "client closed the connection")
        #expect(!m.wantsUpstreamEvents)
        #expect(Self.upstreamBody(&m, 10) == nil)
        #expect(Self.end(&m).isEmpty)
    }

    /// A client that leaves in the middle of its request body: the log says the upload was cut short, and how far
    /// it got (it said only "client closed the connection", as for a client leaving a download).
    @Test func clientLeavingMidRequestBodySaysSo() {
        var m = Self.machine()
        _ = m.start()
        _ = m.requestBodyPart(ByteBuffer(string: "abc"))
        #expect(Self.run(&m, m.clientClosed(requestProgress: "3 of 10 bytes")) == ["cancel", "record"])
        #expect(m.failure == "client closed the connection before the end of its request body (3 of 10 bytes)")
    }

    /// A client that leaves after its whole Content-Length body: no error, and the record waits for curl's outcome.
    @Test func clientLeavingAfterTheWholeBodyAwaitsTheOutcome() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        _ = Self.run(&m, m.upstreamHead(Self.head(200, [("Content-Length", "10")]), .pass(hasBody: true)))
        _ = Self.upstreamBody(&m, 10)
        #expect(Self.run(&m, m.clientClosed()) == ["drain"])
        #expect(m.wantsUpstreamEvents)
        #expect(Self.end(&m) == ["record"])
        #expect(m.failure == nil)
        #expect(!m.wantsUpstreamEvents)
    }

    /// A client stalled: the log names the timeout, not "client closed".
    @Test func timeoutNamesItself() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        m.clientTimedOut("client read nothing for 1.0 s (--idle-timeout)")
        _ = m.clientClosed()
        #expect(m.failure == "hookproxy: client read nothing for 1.0 s (--idle-timeout)")
    }

    /// Issue 11.1 (the quadratic copy): 100 000 one-byte parts buffered for a transform stay linear — the buffer is
    /// never copied out of the state enum per part. (A copy per part would be 5·10⁹ byte copies: minutes, not ms.)
    @Test func bufferingManyPartsIsLinear() {
        var m = Self.machine(body: true, transformRequest: true, limit: 1 << 20)
        #expect(m.start().isEmpty)
        let one = Self.bytes(1)
        var acted = 0
        for _ in 0..<100_000 where m.requestBodyPart(one) != nil { acted += 1 }
        #expect(acted == 0)
        let actions = Self.run(&m, m.requestEnd())
        #expect(actions == ["transformRequest(100000)"])
    }

    // MARK: body transforms

    @Test func requestTransform() {
        var m = Self.machine(body: true, transformRequest: true)
        #expect(m.start().isEmpty)
        #expect(Self.part(&m, Self.bytes(10)) == nil)
        #expect(Self.run(&m, m.requestEnd()) == ["transformRequest(10)"])
        #expect(m.requestComplete)
        #expect(Self.run(&m, m.requestTransformed(.success(Self.bytes(12)))) == ["start(transformed)"])
        _ = Self.run(&m, m.upstreamHead(Self.head(204), .pass(hasBody: false)))
        #expect(Self.end(&m) == ["record", "finish(keep-alive)"])
    }

    @Test func requestOverTheLimitStreamsUnchanged() {
        var m = Self.machine(body: true, transformRequest: true, limit: 15)
        _ = m.start()
        #expect(Self.part(&m, Self.bytes(10)) == nil)
        #expect(Self.part(&m, Self.bytes(10)) == "start(over limit, 20 kept)")
        #expect(Self.part(&m, Self.bytes(10)) == "push(10)")
        #expect(Self.run(&m, m.requestEnd()) == ["endRequest"])
    }

    /// Issue 11.7: the client leaves while the request transform runs; its result starts nothing.
    @Test func lateRequestTransformStartsNothing() {
        var m = Self.machine(body: true, transformRequest: true)
        _ = m.start()
        _ = Self.part(&m, Self.bytes(10))
        _ = m.requestEnd()
        #expect(Self.run(&m, m.clientClosed()) == ["cancel", "record"])
        #expect(m.requestTransformed(.success(Self.bytes(1))).isEmpty)
    }

    @Test func requestTransformFailureAnswers500() {
        var m = Self.machine(body: true, transformRequest: true)
        _ = m.start(); _ = Self.part(&m, Self.bytes(1)); _ = m.requestEnd()
        let failed = ProxyError(.internalError, "hookproxy: request body transform failed")
        #expect(Self.run(&m, m.requestTransformed(.failure(failed))) == ["error(500)", "record", "finish(keep-alive)"])
    }

    @Test func responseTransform() {
        var m = Self.machine(transformResponse: true)
        _ = m.start(); _ = m.requestEnd()
        #expect(m.upstreamHead(Self.head(200), .pass(hasBody: true)).isEmpty)
        #expect(Self.upstreamBody(&m, 10) == nil)
        #expect(Self.end(&m) == ["transformResponse(10)"])
        let transformed = Self.head(200, [("Content-Length", "3")])
        #expect(Self.run(&m, m.responseTransformed(.success((transformed, Self.bytes(3))))) == ["head(200)", "body(3)", "record", "finish(keep-alive)"])
    }

    @Test func responseWithoutBodyIsNotBuffered() {
        var m = Self.machine(transformResponse: true)
        _ = m.start(); _ = m.requestEnd()
        #expect(Self.run(&m, m.upstreamHead(Self.head(304), .pass(hasBody: false))) == ["head(304)"])
    }

    @Test func responseOverTheLimitStreamsUnchanged() {
        var m = Self.machine(transformResponse: true, limit: 15)
        _ = m.start(); _ = m.requestEnd()
        _ = Self.run(&m, m.upstreamHead(Self.head(200), .pass(hasBody: true)))
        #expect(Self.upstreamBody(&m, 10) == nil)
        #expect(Self.upstreamBody(&m, 10) == "streamUnchanged(20)")
        #expect(Self.upstreamBody(&m, 10) == "body(10)")
        #expect(Self.end(&m) == ["record", "finish(keep-alive)"])
        #expect(m.bodyBytesWritten == 30)
    }

    @Test func responseTransformFailingUpstreamAnswers502() {
        var m = Self.machine(transformResponse: true)
        _ = m.start(); _ = m.requestEnd()
        _ = Self.run(&m, m.upstreamHead(Self.head(200), .pass(hasBody: true)))
        #expect(Self.end(&m, Self.error) == ["error(502)", "record", "finish(keep-alive)"])
    }

    // MARK: hooks

    @Test func rewrittenRedirectPassesWithItsEvent() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        let event = HookEvent(hook: .redirect, action: "redirect rewritten")
        #expect(Self.run(&m, m.upstreamHead(Self.head(302), .decided(.passRewritten(Self.head(302), event)))) == ["event(redirect rewritten)", "head(302)"])
    }

    @Test func blockedRedirectIsAnsweredAndTheTransferStopped() {
        var m = Self.machine()
        _ = m.start(); _ = m.requestEnd()
        let blocked = ProxyError(.redirectBlocked, "hookproxy: redirect blocked")
        let event = HookEvent(hook: .redirect, action: "redirect blocked")
        #expect(Self.run(&m, m.upstreamHead(Self.head(302), .decided(.answer(blocked, event)))) == ["event(redirect blocked)", "cancel", "error(502)", "record", "finish(keep-alive)"])
    }

    @Test func followedRedirectStartsTheNextHopWhenTheThreeXXEnds() throws {
        var m = Self.machine(follow: true)
        _ = m.start(); _ = m.requestEnd()
        let next = RequestHead(method: "GET", url: ProxyURL(scheme: "http", host: "a.test", path: "/next"))
        let follower = try #require(m.follower)
        #expect(m.upstreamHead(Self.head(302), .decided(.follow(next, bodyKept: false, follower: follower))).isEmpty)
        #expect(Self.upstreamBody(&m, 10) == nil)  // the 3xx's body is dropped
        #expect(Self.end(&m) == ["record(302)", "nextHop(GET /next, none)"])
        #expect(m.hop == 1)
        #expect(Self.run(&m, m.upstreamHead(Self.head(200, [("Content-Length", "0")]), .pass(hasBody: true))) == ["head(200)"])
        #expect(Self.end(&m) == ["record", "finish(keep-alive)"])
    }

    @Test func followed307ReplaysTheBody() throws {
        var m = Self.machine(body: true, follow: true)
        _ = m.start()
        _ = Self.part(&m, Self.bytes(10))
        _ = m.requestEnd()
        #expect(m.canReplayRequestBody)
        let next = RequestHead(method: "POST", url: ProxyURL(scheme: "http", host: "a.test", path: "/again"))
        _ = Self.run(&m, m.upstreamHead(Self.head(307), .decided(.follow(next, bodyKept: true, follower: try #require(m.follower)))))
        #expect(Self.end(&m) == ["record(307)", "nextHop(POST /again, replay 10)"])
        // later hops never receive the client's live body parts
        #expect(m.requestComplete)
    }

    @Test func aBodyOverTheLimitCannotBeReplayed() {
        var m = Self.machine(body: true, limit: 5, follow: true)
        _ = m.start()
        _ = Self.part(&m, Self.bytes(10))
        #expect(!m.canReplayRequestBody)
    }

    @Test func nextHopAnsweredByARule() throws {
        var m = Self.machine(follow: true)
        _ = m.start(); _ = m.requestEnd()
        let next = RequestHead(method: "GET", url: ProxyURL(scheme: "http", host: "a.test", path: "/mocked"))
        _ = Self.run(&m, m.upstreamHead(Self.head(302), .decided(.follow(next, bodyKept: false, follower: try #require(m.follower)))))
        _ = Self.end(&m)
        var head = Self.head(200, [("Content-Length", "2")])
        #expect((m.headWillBeWritten(&head, hasBody: true) as Bool))
        #expect((m.bodyWillBeWritten(2) as Bool))
        #expect(Self.run(&m, m.nextHopAnsweredLocally()) == ["record", "finish(keep-alive)"])
    }

    // MARK: writes

    @Test func oneHeadOnlyAndNoBodyWithoutIt() {
        var m = Self.machine()
        _ = m.start()
        #expect(!(m.bodyWillBeWritten(3) as Bool))
        var head = Self.head(200)
        #expect((m.headWillBeWritten(&head, hasBody: false) as Bool))
        #expect(!(m.headWillBeWritten(&head, hasBody: false) as Bool))
        #expect(!(m.bodyWillBeWritten(0) as Bool))
    }

    /// A HEAD's (or 204's, 304's) head is the whole response: no body follows it, an error message included.
    @Test func noBodyAfterAHeadWithoutOne() {
        var m = Self.machine()
        _ = m.start()
        var head = Self.head(502, [("Content-Length", "40")])
        #expect((m.headWillBeWritten(&head, hasBody: false) as Bool))
        #expect(!(m.bodyWillBeWritten(40) as Bool))
        #expect(m.bodyBytesWritten == 0)
        #expect(m.responseBodyDelivered, "the head alone is the response")
    }
}
