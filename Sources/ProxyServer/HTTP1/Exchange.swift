import Foundation
import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUpstream

/// One client request and everything hookproxy does for it: the upstream transfer of each hop (one, unless a
/// redirect is followed), request and response body handling (streaming, or buffering for transforms and
/// replays), the hook decisions on the response head, and the log records.
///
/// Event-loop bound (it is `Sendable` only so the bridge's callbacks can be scheduled back onto its loop).
final class Exchange: @unchecked Sendable {
    /// What the current hop's response is doing.
    enum ResponseMode {
        case awaitingHead
        /// The head is out; body bytes go to the client as they come.
        case streaming
        /// The final response waits whole (in `responseBuffer`) for a response body transform.
        case transforming(ResponseHead)
        /// A 3xx being followed: its body is dropped, and the next hop starts when it ends.
        case following(RequestHead, bodyKept: Bool)
        /// hookproxy answered the client itself (block, cancel, error); the transfer's rest is ignored.
        case answered
    }

    let proxy: ProxyContext
    let eventLoop: any EventLoop
    let rules: RuleSet
    /// The plan of the request the client sent: its decisions govern a followed chain, and its response edits
    /// apply to the response the client gets.
    let plan: FlowPlan
    let request: RequestContext
    private let nioHead: HTTPRequestHead
    private var handler: ProxyRequestHandler?

    // the current hop
    private var hop = 0
    private var hopRequest: RequestHead
    private var hopPlan: FlowPlan
    private var upstreamHead: RequestHead
    private var hopStart = Date()
    private var hopEvents: [HookEvent]
    private var bridge: TransferBridge?
    private var transfer: UpstreamTransfer?
    private var follower: RedirectFollower?

    // request body
    /// The request body kept whole for a request body transform; nil while it streams straight to the transfer.
    private var requestBuffer: BufferedBody?
    /// The request body kept for replaying it to a followed redirect's next hop; nil when none may be needed or it
    /// grew past --body-limit.
    private var replay: BufferedBody?
    private var replayBytes: Int { replay?.byteCount ?? 0 }
    private var requestComplete = false
    private var requestBodySize = 0
    private var requestCapture: CapturedBody?

    // response
    private var responseMode = ResponseMode.awaitingHead
    private var responseBuffer: BufferedBody
    private var responseHead: ResponseHead?
    private var responseBodySize = 0
    private var responseCapture: CapturedBody?
    private var responseComplete = false
    private var closeAfterResponse: Bool
    private var failure: String?
    private var recorded = false

    init(proxy: ProxyContext, handler: ProxyRequestHandler, eventLoop: any EventLoop, rules: RuleSet,
         clientHead: RequestHead, nioHead: HTTPRequestHead, keepAlive: Bool, plan: FlowPlan, request: RequestContext) {
        self.proxy = proxy
        self.handler = handler
        self.eventLoop = eventLoop
        self.rules = rules
        self.plan = plan
        self.request = request
        self.nioHead = nioHead
        self.hopRequest = clientHead
        self.hopPlan = plan
        self.hopEvents = plan.events
        var upstreamHead = clientHead
        upstreamHead.headers.remove("Expect")
        plan.editRequest(&upstreamHead)
        proxy.markIfItMayLoop(&upstreamHead)
        self.upstreamHead = upstreamHead
        self.closeAfterResponse = !keepAlive
        self.responseBuffer = BufferedBody(limit: proxy.limits.bodyLimit)
        if proxy.configuration.captureBodies {
            requestCapture = CapturedBody()
            responseCapture = CapturedBody()
        }
        if let redirect = plan.onRedirect, redirect.action == .follow {
            follower = RedirectFollower(policy: redirect, original: clientHead)
        }
    }

    private var clientHead: RequestHead { request.clientHead! }
    private var requestHasBody: Bool { requestFraming != .none }

    private var requestFraming: UpstreamRequest.Body {
        if nioHead.headers.contains(name: "transfer-encoding") { return .chunked }
        if let length = nioHead.headers.first(name: "content-length").flatMap(Int64.init) {
            if length == 0 && ["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"].contains(clientHead.method) { return .none }
            return .length(length)
        }
        return .none
    }

    // MARK: start

    func start() {
        proxy.connections.exchangeStarted()
        if follower != nil && requestHasBody { replay = BufferedBody(limit: proxy.limits.bodyLimit) }
        if plan.requestBodyTransform != nil && requestHasBody {
            requestBuffer = BufferedBody(limit: proxy.limits.bodyLimit)
            return
        }
        startTransfer(body: requestFraming, delayMs: plan.delayMs)
    }

    /// Starts the current hop's upstream transfer with a fresh bridge.
    private func startTransfer(body: UpstreamRequest.Body, delayMs: Int = 0, prefill: [ByteBuffer]? = nil) {
        // A second round of the same request may come: an answered challenge, or the upstream proxy's 407 to a
        // plain-http request. An https request goes through CONNECT, whose 407 round carries no body: its body is
        // not kept (it used to be, up to --body-limit, for every upload through --upstream-proxy).
        let answersChallenge = hopPlan.onChallenge?.action == .useCredential
        let proxyMayAsk = proxy.configuration.upstream.upstreamProxy != nil && upstreamHead.url.scheme == "http"
        let bridge = TransferBridge(
            eventLoop: eventLoop, retainRequest: answersChallenge || proxyMayAsk, retainLimit: proxy.limits.bodyLimit,
            onEvents: { [weak self] in self?.drainResponse() },
            onRequestRoom: { [weak self] in self?.handler?.resumeReading() })
        self.bridge = bridge
        if let prefill {
            for chunk in prefill { _ = bridge.pushRequest(chunk) }
            _ = bridge.endRequest()
        }
        let upstream = UpstreamRequest(head: upstreamHead, body: body, settings: proxy.engine.settings,
                                       trust: hopPlan.trust, challenge: hopPlan.onChallenge)
        hopStart = Date()
        if delayMs > 0 {
            eventLoop.scheduleTask(in: .milliseconds(Int64(delayMs))) { [self] in
                guard !responseComplete, self.bridge === bridge else { return }
                transfer = proxy.engine.start(upstream, delegate: bridge)
            }
        } else {
            transfer = proxy.engine.start(upstream, delegate: bridge)
        }
    }

    // MARK: request body (from the client)

    func receiveRequestBody(_ buffer: ByteBuffer) {
        requestBodySize += buffer.readableBytes
        requestCapture?.append(buffer, limit: proxy.limits.captureLimit)
        if replay?.append(buffer) == false { replay = nil }
        if requestBuffer != nil {
            guard requestBuffer?.append(buffer) == false, let kept = requestBuffer else { return }
            requestBuffer = nil
            warnOverBodyLimit("request", transform: plan.requestBodyTransform)
            hopEvents.append(HookEvent(hook: .body, action: "request body over --body-limit", detail: "sent unchanged"))
            startTransfer(body: requestFraming)
            for chunk in kept.chunks { push(chunk) }
            return
        }
        guard hop == 0, !responseComplete else { return }
        push(buffer)
    }

    /// SPEC: a body over --body-limit that a transform wanted streams unchanged, with a warning on stderr naming the
    /// rules, the URL and the limit.
    private func warnOverBodyLimit(_ direction: String, transform: (any BodyTransforming)?) {
        let rules = (transform?.ruleNames ?? []).map { "'\($0)'" }.joined(separator: ", ")
        proxy.logger.warning("\(direction) body of \(clientHead.method) \(clientHead.url) is over --body-limit (\(proxy.limits.bodyLimit) bytes): rule \(rules) skipped, body sent unchanged")
    }

    private func push(_ buffer: ByteBuffer) {
        guard let bridge else { return }
        let (resumeCurl, pauseClient) = bridge.pushRequest(buffer)
        if pauseClient { handler?.pauseReading() }
        if resumeCurl { transfer?.resume() }
    }

    func finishRequestBody() {
        requestComplete = true
        if let kept = requestBuffer {
            requestBuffer = nil
            transformRequestBody(kept)
        } else if hop == 0, let bridge, bridge.endRequest() {
            transfer?.resume()
        }
        if responseComplete { finishConnectionUse(endAlreadySent: true) }
    }

    private func transformRequestBody(_ kept: BufferedBody) {
        guard let transform = plan.requestBodyTransform else { return }
        let bytes = kept.joined()
        let headers = upstreamHead.headers
        proxy.transformPool.runIfActive(eventLoop: eventLoop) { () -> ([UInt8], HeaderFields, [String]) in
            var headers = headers
            let (body, notes) = transform.apply(to: bytes, headers: &headers)
            return (body, headers, notes)
        }.whenComplete { [self] result in
            // The client may have left while the transform ran: then no transfer starts (nothing would drain it).
            guard handler != nil, !responseComplete else { return }
            guard case .success(let (body, headers, notes)) = result else {
                fail(ProxyError(.internalError, "hookproxy: request body transform failed for \(clientHead.url.authority)"))
                return
            }
            upstreamHead.headers = headers
            upstreamHead.headers.remove("Transfer-Encoding")
            upstreamHead.headers.set("Content-Length", String(body.count))
            hopEvents += notes.map { HookEvent(hook: .body, action: "request body", detail: $0) }
            if replay != nil {
                replay = BufferedBody(limit: Int.max)
                replay?.append(ByteBuffer(bytes: body))
            }
            startTransfer(body: .length(Int64(body.count)), delayMs: plan.delayMs, prefill: [ByteBuffer(bytes: body)])
        }
    }

    /// Set (to self) when the client left after receiving the whole Content-Length body but before curl reported
    /// the end: the exchange stays alive until the outcome arrives, so the log keeps its timings and hook events
    /// (`trust accepted`, `challenge answered`), which travel with the outcome. Cleared by the final record.
    private var awaitingOutcome: Exchange?

    /// The client went away: stop the upstream transfer at once (unless it already had the whole response and only
    /// curl's end report is missing).
    func clientClosed() {
        guard !responseComplete else { return }
        if responseBodyDelivered, requestComplete, case .streaming = responseMode, transfer != nil {
            handler = nil
            awaitingOutcome = self
            drainResponse()
            return
        }
        transfer?.cancel()
        if !responseBodyDelivered { failure = failure ?? "client closed the connection" }
        responseComplete = true
        requestComplete = true
        handler = nil
        record(response: responseHead, outcome: nil, final: true)
    }

    /// Whether the whole response has been handed to the client's channel.
    var responseIsComplete: Bool { responseComplete }

    /// Whether the client's request body has been read to its end.
    var requestBodyComplete: Bool { requestComplete }

    /// The handler is about to close a client that stalled: the log says why (instead of "client closed").
    func clientTimedOut(_ reason: String) {
        failure = failure ?? "hookproxy: \(reason)"
    }

    /// A Content-Length body fully written: the client may rightly close before curl reports the end.
    private var responseBodyDelivered: Bool {
        guard let length = responseHead?.headers["content-length"].flatMap(Int.init) else { return false }
        return responseBodySize >= length
    }

    // MARK: response (from curl, through the bridge)

    /// Handles what curl produced while the client keeps up; resumes curl once the backlog is small.
    func drainResponse() {
        guard let bridge, handler != nil || awaitingOutcome != nil else { return }
        var wrote = false
        while true {
            let (event, resumeCurl) = bridge.nextEvent(clientWritable: handler?.isWritable ?? true)
            if resumeCurl { transfer?.resume() }
            guard let event else { break }
            wrote = true
            switch event {
            case .head(let head): receive(head)
            case .body(let buffer): receive(buffer)
            case .end(let outcome): end(outcome)
            }
            if self.bridge !== bridge { break }  // a new hop started
        }
        if wrote { self.handler?.flush() }
    }

    private func receive(_ upstream: ResponseHead) {
        guard case .awaitingHead = responseMode else { return }
        var head = upstream
        if let problem = ResponseFraming.sanitize(&head) {
            // Never forwarded: the client could read a second response out of it. Dropping the transfer also drops
            // its upstream connection (RFC 9112 §6.3).
            transfer?.cancel()
            fail(ProxyError(.upstreamFailed, "hookproxy: bad response from \(upstreamHead.url.authority): \(problem)"))
            return
        }
        if let decision = HookDecisions.onHead(head, exchange: self) {
            apply(decision, to: head)
            return
        }
        if plan.responseBodyTransform != nil, hop == 0 || follower != nil,
           ResponseHead.hasBody(status: head.status, requestMethod: clientHead.method) {
            responseMode = .transforming(head)
            return
        }
        writeHead(head)
        responseMode = .streaming
    }

    private func receive(_ buffer: ByteBuffer) {
        switch responseMode {
        case .streaming:
            writeBody(buffer)
        case .transforming(let head):
            guard !responseBuffer.append(buffer) else { return }
            warnOverBodyLimit("response", transform: plan.responseBodyTransform)
            hopEvents.append(HookEvent(hook: .body, action: "response body over --body-limit", detail: "streamed unchanged"))
            writeHead(head)
            responseMode = .streaming
            let kept = responseBuffer.chunks
            responseBuffer = BufferedBody(limit: 0)
            for chunk in kept { writeBody(chunk) }
        case .awaitingHead, .following, .answered:
            break
        }
    }

    private func end(_ outcome: UpstreamOutcome) {
        switch responseMode {
        case .awaitingHead:
            fail(outcome.error ?? ProxyError(.upstreamClosed, "hookproxy: upstream closed the connection \(upstreamHead.url.authority): before a complete response head"), outcome: outcome)
        case .streaming:
            if let error = outcome.error {
                // The head is out: all the client can learn is that the body ended early.
                failure = error.message
                responseComplete = true
                record(response: responseHead, outcome: outcome, final: true)
                handler?.closeConnection()
                return
            }
            completeResponse(outcome: outcome)
        case .transforming(let head):
            if let error = outcome.error {
                fail(error, outcome: outcome)
                return
            }
            transformResponse(head, outcome: outcome)
        case .following(let next, let bodyKept):
            record(response: pendingRedirectHead, outcome: outcome, final: false)
            startNextHop(next, bodyKept: bodyKept)
        case .answered:
            record(response: responseHead, outcome: outcome, final: true)
        }
    }

    private func transformResponse(_ head: ResponseHead, outcome: UpstreamOutcome) {
        guard let transform = plan.responseBodyTransform else { return }
        let bytes = responseBuffer.joined()
        responseBuffer = BufferedBody(limit: 0)
        proxy.transformPool.runIfActive(eventLoop: eventLoop) { () -> ([UInt8], HeaderFields, [String]) in
            var headers = head.headers
            let (body, notes) = transform.apply(to: bytes, headers: &headers)
            return (body, headers, notes)
        }.whenComplete { [self] result in
            guard handler != nil else { return }
            guard case .success(let (body, headers, notes)) = result else {
                fail(ProxyError(.internalError, "hookproxy: response body transform failed for \(clientHead.url.authority)"), outcome: outcome)
                return
            }
            var transformed = head
            transformed.headers = headers
            transformed.headers.remove("Transfer-Encoding")
            transformed.headers.set("Content-Length", String(body.count))
            hopEvents += notes.map { HookEvent(hook: .body, action: "response body", detail: $0) }
            writeHead(transformed)
            // in pieces: the client-side idle timeout counts completed writes, and one huge write completes late
            var buffer = ByteBuffer(bytes: body)
            while let piece = buffer.readSlice(length: min(buffer.readableBytes, 64 * 1024)), piece.readableBytes > 0 {
                writeBody(piece)
            }
            completeResponse(outcome: outcome)
        }
    }

    // MARK: hook decisions

    /// The 3xx being followed, for its hop's log record.
    private var pendingRedirectHead: ResponseHead?

    private func apply(_ decision: HookDecisions.Decision, to head: ResponseHead) {
        switch decision {
        case .passRewritten(let rewritten, let event):
            hopEvents.append(event)
            writeHead(rewritten)
            responseMode = .streaming
        case .follow(let next, let bodyKept):
            if bodyKept && requestHasBody && replay == nil {
                transfer?.cancel()
                fail(ProxyError(.bodyTooLarge, "hookproxy: cannot follow the redirect from \(hopRequest.url.authority): the request body was larger than --body-limit (\(proxy.limits.bodyLimit) bytes) and cannot be replayed"))
                return
            }
            pendingRedirectHead = head
            responseMode = .following(next, bodyKept: bodyKept)
        case .answer(let error, let event):
            hopEvents.append(event)
            transfer?.cancel()
            fail(error)
        }
    }

    private func startNextHop(_ next: RequestHead, bodyKept: Bool) {
        hop += 1
        hopRequest = next
        hopPlan = rules.plan(for: next)
        hopEvents = hopPlan.events
        responseMode = .awaitingHead
        if let local = hopPlan.localResponse {
            var head = local.head
            plan.editResponse(&head)
            writeHead(head, applyEdits: false)
            writeBody(ByteBuffer(bytes: local.body))
            completeResponse(outcome: UpstreamOutcome())
            return
        }
        var head = next
        hopPlan.editRequest(&head)
        proxy.markIfItMayLoop(&head)
        upstreamHead = head
        if bodyKept, let replay, replay.byteCount > 0 {
            startTransfer(body: .length(Int64(replay.byteCount)), prefill: replay.chunks)
        } else {
            upstreamHead.headers.remove("Content-Length")
            startTransfer(body: .none)
        }
    }

    var currentHop: (request: RequestHead, plan: FlowPlan, index: Int) { (hopRequest, hopPlan, hop) }

    func nextRedirect(after status: Int, location: String) -> RedirectFollower.Step {
        follower?.next(after: hopRequest, status: status, location: location) ?? .pass
    }

    // MARK: writing to the client

    private func writeHead(_ upstream: ResponseHead, applyEdits: Bool = true) {
        guard let handler, responseHead == nil else { return }
        var head = upstream
        HopByHop.strip(&head.headers)
        if applyEdits { plan.editResponse(&head) }
        if hop > 0 {
            hopEvents.append(HookEvent(hook: .redirect, action: "redirect followed \(hop) hop\(hop == 1 ? "" : "s")"))
        }
        let hasBody = ResponseHead.hasBody(status: head.status, requestMethod: clientHead.method)
        if hasBody && !head.headers.contains("content-length") && nioHead.version == .http1_0 {
            closeAfterResponse = true  // HTTP/1.0 client: the body ends when the connection closes
        }
        if closeAfterResponse {
            head.headers.set("Connection", "close")
        } else if nioHead.version == .http1_0 {
            head.headers.set("Connection", "keep-alive")
        }
        responseHead = head
        handler.send(.head(head.nioHead(version: nioHead.version)))
    }

    private func writeBody(_ buffer: ByteBuffer) {
        guard let handler, responseHead != nil, buffer.readableBytes > 0 else { return }
        responseBodySize += buffer.readableBytes
        responseCapture?.append(buffer, limit: proxy.limits.captureLimit)
        handler.send(.body(.byteBuffer(buffer)))
    }

    /// Answers the client with hookproxy's own error response.
    private func fail(_ error: ProxyError, outcome: UpstreamOutcome? = nil) {
        failure = error.message
        responseMode = .answered
        guard responseHead == nil else {
            responseComplete = true
            record(response: responseHead, outcome: outcome, final: true)
            handler?.closeConnection()
            return
        }
        if !requestComplete { closeAfterResponse = true }
        let local = LocalResponse.error(error)
        writeHead(local.head, applyEdits: false)
        writeBody(ByteBuffer(bytes: local.body))
        completeResponse(outcome: outcome ?? UpstreamOutcome())
    }

    private func completeResponse(outcome: UpstreamOutcome) {
        responseComplete = true
        record(response: responseHead, outcome: outcome, final: true)
        if requestComplete || closeAfterResponse {
            finishConnectionUse(endAlreadySent: false)
        } else {
            // The upstream answered before the request body was done (a 413 to an upload, say): the rest of the
            // body is read and dropped, so a client that writes its whole body before reading gets its answer.
            _ = handler?.sendEnd()
            handler?.resumeReading()
        }
    }

    /// Hands the connection back (idle, or closing) once both the request and the response are complete.
    private func finishConnectionUse(endAlreadySent: Bool) {
        guard let handler else { return }
        self.handler = nil
        handler.exchangeFinished(self, close: closeAfterResponse, endAlreadySent: endAlreadySent)
    }

    // MARK: log

    /// Credentials hookproxy itself adds, and header values rules set from the environment: never logged, even
    /// with --log-secrets.
    private var secretValues: [String] {
        var secrets = plan.secretValues + (hop > 0 ? hopPlan.secretValues : [])
        if let challenge = hopPlan.onChallenge, let password = challenge.password, !password.isEmpty {
            secrets.append(password)
            if let user = challenge.username {
                secrets.append("Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
            }
        }
        if let proxyURL = proxy.configuration.upstream.upstreamProxy, let at = proxyURL.lastIndex(of: "@"),
           let schemeEnd = proxyURL.range(of: "://"), schemeEnd.upperBound < at {
            let userinfo = String(proxyURL[schemeEnd.upperBound..<at])
            if let colon = userinfo.firstIndex(of: ":") { secrets.append(String(userinfo[userinfo.index(after: colon)...])) }
        }
        return secrets
    }

    private func record(response: ResponseHead?, outcome: UpstreamOutcome?, final: Bool) {
        guard !recorded else { return }
        if final {
            recorded = true
            proxy.connections.exchangeEnded()
            awaitingOutcome = nil
        }
        guard proxy.configuration.recorder != nil else { return }  // --quiet without log files: nothing to build
        let flow = FlowRecord(
            id: proxy.makeFlowID(), start: hop == 0 ? request.start : hopStart, client: request.client,
            request: upstreamHead, url: hopRequest.url.description, upstreamURL: upstreamHead.url.description,
            response: response, requestBodySize: hop == 0 ? requestBodySize : (upstreamHead.method == clientHead.method ? replayBytes : 0),
            responseBodySize: final ? responseBodySize : 0, requestBody: hop == 0 ? requestCapture : nil,
            responseBody: final ? responseCapture : nil, timings: outcome?.timings ?? Timings(),
            durationMs: Date().timeIntervalSince(hop == 0 ? request.start : hopStart) * 1000,
            rules: hopPlan.firedRules, events: hopEvents + (outcome?.events ?? []), error: final ? failure : nil, hop: hop,
            serverIP: outcome?.serverIP, connectionID: outcome?.connectionID, secretValues: secretValues)
        proxy.record(flow)
    }
}

extension CapturedBody {
    mutating func append(_ buffer: ByteBuffer, limit: Int) {
        let room = limit - bytes.count
        if buffer.readableBytes > room { truncated = true }
        guard room > 0 else { return }
        bytes.append(contentsOf: buffer.readableBytesView.prefix(room))
    }
}
