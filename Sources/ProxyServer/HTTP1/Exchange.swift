import FoundationEssentials
import Glibc
import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUpstream

/// One client request and everything hookproxy does for it, as the driver of its `ExchangeStateMachine`: it feeds
/// the machine what the client, curl and the transform pool report, and performs the actions the machine returns —
/// starting each hop's upstream transfer (one, unless a redirect is followed), writing to the client, and the log
/// records. The decisions live in the machine; this type holds the data they act on.
///
/// Threading: every method runs on `eventLoop` (the client channel's); `ExchangeClient` is the contract with the
/// connection it serves. Curl's reports arrive through the hop's `TransferBridge`, which schedules `drainResponse`
/// on the loop.
/// Not Sendable: the bridge's callbacks reach it through a loop-bound weak reference (`LoopBoundExchange`).
final class Exchange {
    let proxy: ProxyContext
    let eventLoop: any EventLoop
    let rules: RuleSet
    /// The plan of the request the client sent: its decisions govern a followed chain, and its response edits
    /// apply to the response the client gets.
    let plan: FlowPlan
    let request: RequestContext
    /// How the client frames its request body (decided once, from the parsed head).
    private let requestFraming: UpstreamRequest.Body
    private let clientVersion: HTTPVersion
    private var handler: (any ExchangeClient)?
    private var machine: ExchangeStateMachine
    /// Set (to self) while the client is gone and only curl's outcome is awaited: nothing else holds the exchange.
    private var retainedUntilOutcome: Exchange?

    // the current hop
    private var hopRequest: RequestHead
    private var hopPlan: FlowPlan
    private var upstreamHead: RequestHead
    private var hopStart = Date()
    private var hopEvents: [HookEvent]
    private var bridge: TransferBridge?
    private var transfer: UpstreamTransfer?
    private var outcome: UpstreamOutcome?
    private var transformedRequest: ByteBuffer?
    /// A gRPC Trailers-Only answer's status fields, taken out of the head to end the response (GRPCTrailersOnly).
    private var trailersFromHead: HeaderFields?

    // throttling (nil pacers: that direction is not limited)
    /// The rules' `throttle`, per field, then `--throttle`; nil when it limits nothing.
    private let throttle: Throttle?
    private let downPacer: Pacer?
    private let upPacer: Pacer?
    /// The rest of a response body chunk that `downPacer` split: it goes to the client before any other event.
    private var heldResponseBody: ByteBuffer?
    /// Request body chunks waiting for `upPacer`, and what holds client reading paused.
    private var pacedUpload = PacedUpload()
    /// The client's request trailers, once its body ended with some (forwarded by an HTTP/1.1 chunked upload).
    private var clientTrailers: HeaderFields?
    /// The 1xx responses the upstream sent so far (`forward(informational:)`).
    private var informationalCount = 0
    /// The current hop's response head as the upstream sent it: its `Connection` also names trailers that stay.
    private var upstreamResponseHeaders = HeaderFields()

    // for the log
    private var requestBodySize = 0
    private var requestCapture: CapturedBody?
    private var responseHead: ResponseHead?
    private var responseCapture: CapturedBody?

    init(proxy: ProxyContext, handler: any ExchangeClient, eventLoop: any EventLoop, rules: RuleSet,
         clientHead: RequestHead, keepAlive: Bool, plan: FlowPlan, request: RequestContext) {
        self.proxy = proxy
        self.handler = handler
        self.eventLoop = eventLoop
        self.rules = rules
        self.plan = plan
        self.request = request
        let framing = RequestFraming.body(of: request.head, method: clientHead.method)
        self.requestFraming = framing
        self.clientVersion = request.head.version
        self.hopRequest = clientHead
        self.hopPlan = plan
        self.hopEvents = plan.events
        var upstreamHead = clientHead
        upstreamHead.headers.remove("Expect")
        plan.editRequest(&upstreamHead)
        proxy.markIfItMayLoop(&upstreamHead)
        self.upstreamHead = upstreamHead
        let follower = plan.onRedirect.flatMap {
            $0.action == .follow ? RedirectFollower(policy: $0, original: clientHead) : nil
        }
        self.machine = ExchangeStateMachine(.init(
            requestHasBody: framing != .none,
            transformsRequest: plan.requestBodyTransform != nil && framing != .none,
            transformsResponse: plan.responseBodyTransform != nil,
            keepAlive: keepAlive, clientIsHTTP10: clientVersion == .http1_0,
            bodyLimit: proxy.limits.bodyLimit), follower: follower)
        if proxy.configuration.captureBodies {
            requestCapture = CapturedBody()
            responseCapture = CapturedBody()
        }
        let global = proxy.configuration.throttle
        let throttle = plan.throttle.map { $0.filling(from: global) } ?? global
        if let throttle, throttle.isActive {
            self.throttle = throttle
            downPacer = throttle.downBytesPerSecond.map { Pacer(bytesPerSecond: $0, eventLoop: eventLoop) }
            upPacer = throttle.upBytesPerSecond.map { Pacer(bytesPerSecond: $0, eventLoop: eventLoop) }
            hopEvents.append(throttleEvent(throttle, global: global))
        } else {
            self.throttle = nil
            downPacer = nil
            upPacer = nil
        }
    }

    /// `throttled down 1000 kbps up 500 kbps latency 100 ms`, with where it came from.
    private func throttleEvent(_ throttle: Throttle, global: Throttle?) -> HookEvent {
        let source = switch (plan.throttle, global) {
        case (nil, _): "--throttle"
        case (let rules?, let global?) where rules.filling(from: nil) != rules.filling(from: global): "rules, then --throttle"
        default: "rules"
        }
        return HookEvent(hook: .throttle, action: throttle.description, detail: source)
    }

    private var clientHead: RequestHead { request.clientHead! }
    /// The id the viewer shows the current hop under while it is pending (its record keeps it); nil without a
    /// viewer, and once that record is made.
    private var startedFlowID: Int?

    /// Whether the whole response has been handed to the client's channel.
    var responseIsComplete: Bool { machine.responseComplete }

    /// Whether the client's request body has been read to its end.
    var requestBodyComplete: Bool { machine.requestComplete }

    // MARK: inputs

    func start() {
        proxy.connections.exchangeStarted()
        if proxy.viewer?.store.isWatched == true {
            // A watching viewer shows the exchange as pending from now on, under the id its hop-0 record will carry
            // (nobody watching: nothing to show, and the record is not built).
            let id = proxy.makeFlowID()
            startedFlowID = id
            proxy.started(request.record(id: id, response: nil, bodySize: 0, events: plan.events))
        }
        perform(machine.start())
    }

    func receiveRequestBody(_ buffer: ByteBuffer) {
        requestBodySize += buffer.readableBytes
        requestCapture?.append(buffer, limit: proxy.limits.captureLimit)
        if let action = machine.requestBodyPart(buffer) { perform(action) }
    }

    func finishRequestBody(trailers: HTTPHeaders? = nil) {
        if let trailers, !trailers.isEmpty { clientTrailers = Exchange.forwardable(HeaderFields(trailers), connection: request.head.headers["connection"], in: .request) }
        perform(machine.requestEnd())
    }

    /// The trailer fields that may go on, the client's or the upstream's: none of those RFC 9110 §6.5.1 forbids in
    /// trailers (framing, routing, request modifiers, authentication, content metadata) and no hop-by-hop field,
    /// which the rules' header edits never see. (An upstream's `Content-Length` or `Connection` in its trailers
    /// made an HTTP/2 client fail the stream, and reached an HTTP/1.1 client in the chunked trailer.)
    private static func forwardable(_ trailers: HeaderFields, connection: [String], in message: HopByHop.Message) -> HeaderFields? {
        var fields = trailers
        HopByHop.strip(trailers: &fields, connection: connection, in: message)
        fields.removeAll { field in
            field.name.lowercased().hasPrefix("if-") || forbiddenTrailers.contains { field.name.caseInsensitiveEquals($0) }
                // (as in a head, where they get 502: here the body is out, so the field goes instead)
                || !HTTPToken.isToken(field.name) || HTTPToken.hasControlCharacter(field.value)
        }
        return fields.isEmpty ? nil : fields
    }

    private static let forbiddenTrailers = [
        "content-length", "transfer-encoding", "host", "trailer", "te", "expect", "max-forwards", "range", "cache-control",
        "pragma", "authorization", "proxy-authorization", "cookie", "set-cookie", "www-authenticate",
        "content-type", "content-encoding", "content-range", "content-location", "content-language",
    ]

    /// The client went away: stop the upstream transfer at once (unless it already had the whole response and only
    /// curl's end report is missing).
    func clientClosed() {
        let progress = switch requestFraming {
        case .length(let length): "\(requestBodySize) of \(length) bytes"
        case .chunked, .none: "\(requestBodySize) bytes so far"
        }
        if proxy.connections.cutOffByShutdown { machine.clientTimedOut(ConnectionTracker.shutdownCutOff) }
        let actions = machine.clientClosed(requestProgress: progress)
        handler = nil
        stopPacing()
        perform(actions)
    }

    /// The handler is about to close a client that stalled: the log says why (instead of "client closed").
    func clientTimedOut(_ reason: String) {
        machine.clientTimedOut(reason)
    }

    /// The parser refused what the client sent within this request: the exchange ends now, before hookproxy's 400
    /// goes out (no response of the upstream's may follow it), and the log says why.
    func clientRefused(_ error: ProxyError) {
        machine.clientRefused(error.message)
        clientClosed()
    }

    /// Handles what curl produced while the client keeps up; resumes curl once the backlog is small.
    ///
    /// Throttled (`downPacer`), it takes no more body bytes than the pacer allows: a chunk is split at the limit and
    /// its rest held for the pacer's wake-up, and meanwhile the bridge is not drained, so its high-water mark pauses
    /// curl. Once the client is gone nothing is paced (the bytes are only discarded).
    func drainResponse() {
        guard let bridge, machine.wantsUpstreamEvents else { return }
        var wrote = false
        while true {
            let writable = handler?.isWritable ?? true
            let pacer = machine.clientConnected ? downPacer : nil
            var event: TransferBridge.Event
            if let held = heldResponseBody {
                guard writable || pacer == nil else { break }
                heldResponseBody = nil
                event = .body(held)
            } else {
                if pacer?.isWaiting == true { break }
                let (next, resumeCurl) = bridge.nextEvent(clientWritable: writable)
                if resumeCurl { transfer?.resume() }
                guard let next else { break }
                event = next
            }
            if let pacer, case .body(var buffer) = event {
                let allowed = pacer.allow(buffer.readableBytes) { [weak self] in self?.drainResponse() }
                if allowed < buffer.readableBytes {
                    let part = buffer.readSlice(length: allowed)!
                    heldResponseBody = buffer
                    guard allowed > 0 else { break }
                    event = .body(part)
                }
            }
            wrote = true
            switch event {
            case .informational(let head): forward(informational: head)
            case .head(let head): receive(head)
            case .body(let buffer): if let action = machine.upstreamBody(buffer) { perform(action) }
            case .end(let outcome): end(outcome)
            }
            if self.bridge !== bridge { break }  // a new hop started
        }
        if wrote { self.handler?.flush() }
    }

    private func receive(_ upstream: ResponseHead) {
        upstreamResponseHeaders = upstream.headers
        var head = upstream
        let verdict: ExchangeStateMachine.HeadVerdict
        if head.status == 101 {
            // Upgrade requests go to `UpgradeHandshake`: this one asked for none (or hookproxy dropped its Upgrade), so
            // a switch is the server's error, and what follows it has no HTTP framing (curl would read it to the close).
            verdict = .malformed(ProxyError(.upstreamFailed, "hookproxy: bad response from \(upstreamHead.url.authority): 101 Switching Protocols to a request that asked for no upgrade"))
        } else if let problem = ResponseFraming.sanitize(&head) {
            verdict = .malformed(ProxyError(.upstreamFailed, "hookproxy: bad response from \(upstreamHead.url.authority): \(problem)"))
        } else if let problem = headTooLargeForClient(head) {
            verdict = .malformed(ProxyError(.upstreamFailed, "hookproxy: response from \(upstreamHead.url.authority) cannot reach this HTTP/2 client: \(problem)"))
        } else if plan.onRedirect != nil || hopPlan.onChallenge?.action == .cancel,  // (most heads meet no hook)
                  let decision = HookDecisions.onHead(head, .init(
                      request: hopRequest, hopPlan: hopPlan, redirectPolicy: plan.onRedirect, follower: machine.follower,
                      canReplayBody: machine.canReplayRequestBody, bodyLimit: proxy.limits.bodyLimit)) {
            verdict = .decided(decision)
        } else {
            verdict = .pass(hasBody: ResponseHead.hasBody(status: head.status, requestMethod: clientHead.method))
        }
        perform(machine.upstreamHead(head, verdict))
    }

    /// A 1xx the upstream sent before its final head goes on to the client (RFC 9110 §15.2: a proxy forwards them),
    /// its hop-by-hop fields dropped, the rules' response edits not applied (they are the final response's), and is
    /// noted in the log. Not a 100 (hookproxy answered the client's `Expect` itself), not to an HTTP/1.0 client (which
    /// would read it as the response), nor once the final head is decided; one that breaks a field is dropped. At most
    /// `informationalLimit` of them: curl takes 300 KiB of heads, some 17,000 empty 1xx, and each was a log event.
    private func forward(informational upstream: ResponseHead) {
        guard upstream.status != 100, machine.mayWriteInformational, let handler else { return }
        informationalCount += 1
        guard informationalCount <= Self.informationalLimit else {
            if informationalCount == Self.informationalLimit + 1 {
                hopEvents.append(HookEvent(hook: .upstream, action: "further 1xx responses dropped",
                                           detail: "\(Self.informationalLimit) came before them"))
            }
            return
        }
        var head = upstream
        let standard = ResponseHead.standardReason(for: head.status)
        if !standard.isEmpty, head.reason.isEmpty { head.reason = standard }  // (an HTTP/2 upstream's has none)
        let status = standard.isEmpty ? "\(head.status)" : "\(head.status) \(standard)"
        let refusal: String? = if clientVersion == .http1_0 { "an HTTP/1.0 client" }
            else if let problem = ResponseFraming.sanitize(&head) { problem }
            else { nil }
        HopByHop.strip(&head.headers, in: .response)
        head.headers.remove("content-length")
        head.headers.remove("transfer-encoding")
        let tooLarge = clientVersion.major >= 2
            ? HTTP2HeaderBlock.problem(status: head.status, head.headers, what: "the informational head") : nil
        if let why = refusal ?? tooLarge {
            hopEvents.append(HookEvent(hook: .upstream, action: "\(status) not forwarded", detail: why))
            return
        }
        hopEvents.append(HookEvent(hook: .upstream, action: "\(status) forwarded"))
        handler.send(.head(head.nioHead(version: clientVersion)))
    }

    /// How many 1xx responses one exchange forwards (or notes as dropped), all hops together.
    static let informationalLimit = 8

    /// Why the head, as it would be written, is too large for the client's HTTP/2 stream (nil for HTTP/1 clients,
    /// which take any head curl took): see `HTTP2HeaderBlock`. Failing the exchange answers 502 on this stream only.
    private func headTooLargeForClient(_ upstream: ResponseHead) -> String? {
        guard clientVersion.major >= 2 else { return nil }
        var head = upstream
        HopByHop.strip(&head.headers, in: .response)
        plan.editResponse(&head)
        return HTTP2HeaderBlock.problem(status: head.status, head.headers, what: "the response head")
    }

    private func end(_ outcome: UpstreamOutcome) {
        var outcome = outcome
        outcome.trailers = outcome.trailers.flatMap { Exchange.forwardable($0, connection: upstreamResponseHeaders.values(for: "connection"), in: .response) }
        if outcome.error == nil, clientVersion.major >= 2, let trailers = outcome.trailers,
           let problem = HTTP2HeaderBlock.problem(status: nil, trailers, what: "the trailer block") {
            // Too large for one frame: the stream is reset (the body is out; only its end is refused), not the
            // connection with every other stream on it.
            outcome.error = ProxyError(.upstreamFailed, "hookproxy: response from \(upstreamHead.url.authority) cannot reach this HTTP/2 client: \(problem)")
            outcome.trailers = nil
        }
        self.outcome = outcome
        perform(machine.upstreamEnd(error: outcome.error, closedEarly: ProxyError(
            .upstreamClosed, "hookproxy: upstream closed the connection \(self.upstreamHead.url.authority): before a complete response head")))
    }

    // MARK: actions

    private func perform(_ actions: [ExchangeStateMachine.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ExchangeStateMachine.Action) {
        switch action {
        case .startTransfer(let upload):
            startTransfer(upload)
        case .pushRequestBody(let buffer):
            push(buffer)
        case .endRequestBody:
            endRequestBody()
        case .transformRequestBody(let kept):
            transform(request: kept)
        case .several(let actions):
            perform(actions)
        case .cancelTransfer:
            transfer?.cancel()
        case .event(let event):
            hopEvents.append(event)
        case .writeHead(let head, let applyEdits):
            writeHead(head, applyEdits: applyEdits)
        case .writeBody(let buffer):
            writeBody(buffer)
        case .streamUnchanged(let head, let kept):
            warnOverBodyLimit("response", transform: plan.responseBodyTransform)
            hopEvents.append(HookEvent(hook: .body, action: "response body over --body-limit", detail: "streamed unchanged"))
            writeHead(head)
            for chunk in kept { writeBody(chunk) }
        case .transformResponseBody(let head, let kept):
            transform(response: head, kept)
        case .writeError(let error):
            let local = LocalResponse.error(error)
            writeHead(local.head, applyEdits: false)
            writeBody(ByteBuffer(bytes: local.body))
        case .startNextHop(let next, let upload):
            startNextHop(next, upload)
        case .record(.final):
            record(response: responseHead, final: true)
        case .record(.redirect(let head)):
            record(response: head, final: false)
        case .closeConnection:
            handler?.closeConnection()
        case .finishConnection(let close, let endAlreadySent):
            guard let handler else { return }
            self.handler = nil
            handler.exchangeFinished(self, close: close, endAlreadySent: endAlreadySent, trailers: trailersForClient)
        case .endResponseAndDrainRequest:
            _ = handler?.sendEnd(trailers: trailersForClient)
            handler?.resumeReading()
        case .drain:
            retainedUntilOutcome = self
            drainResponse()
        }
    }

    /// The upstream's trailers, when the client takes them: an HTTP/2 client always; an HTTP/1.1 client that sent
    /// `TE: trailers` (NIO's encoder writes them after the last chunk of a chunked response).
    private var trailersForClient: HTTPHeaders? {
        let trailers = HeaderFields(Array(trailersFromHead ?? []) + Array(outcome?.trailers ?? []))
        guard !trailers.isEmpty, machine.failure == nil, clientTakesTrailers else { return nil }
        return trailers.nioHeaders
    }

    private var clientTakesTrailers: Bool {
        clientVersion.major >= 2 || clientHead.headers.values(for: "te").contains { $0.lowercased().contains("trailers") }
    }

    /// Starts the current hop's upstream transfer with a fresh bridge.
    private func startTransfer(_ upload: ExchangeStateMachine.Upload) {
        let body: UpstreamRequest.Body
        var prefill: [ByteBuffer]?
        var delayed = false
        switch upload {
        case .fromClient(let isDelayed):
            body = requestFraming
            delayed = isDelayed
        case .overLimit:
            warnOverBodyLimit("request", transform: plan.requestBodyTransform)
            hopEvents.append(HookEvent(hook: .body, action: "request body over --body-limit", detail: "sent unchanged"))
            body = requestFraming
        case .transformed:
            let bytes = transformedRequest ?? ByteBuffer()
            transformedRequest = nil
            body = .length(Int64(bytes.readableBytes))
            prefill = [bytes]
            delayed = true
        case .replay(let chunks):
            body = .length(Int64(chunks.reduce(0) { $0 + $1.readableBytes }))
            prefill = chunks
        case .none:
            upstreamHead.headers.remove("Content-Length")
            body = .none
        }
        // A second round of the same request may come: an answered challenge, or the upstream proxy's 407 to a
        // plain-http request. An https request goes through CONNECT, whose 407 round carries no body: its body is
        // not kept.
        let answersChallenge = hopPlan.onChallenge?.action == .useCredential
        let proxyMayAsk = proxy.configuration.upstream.upstreamProxy != nil && upstreamHead.url.scheme == "http"
        // libcurl 7.88 sends a request again on a fresh connection when a reused HTTP/2 one ends its stream before
        // any response (a refused stream, or a trailers-only answer to an upload it had not finished): a small body
        // is kept for that rewind.
        let mayRetryOnH2 = upstreamHead.url.scheme == "https" && proxy.engine.settings.http2
        let retainsForAuth = answersChallenge || proxyMayAsk
        let exchange = NIOLoopBound(WeakExchange(self), eventLoop: eventLoop)
        let bridge = TransferBridge(
            eventLoop: eventLoop, retainRequest: retainsForAuth || mayRetryOnH2,
            retainLimit: retainsForAuth ? proxy.limits.bodyLimit : min(proxy.limits.bodyLimit, 64 * 1024),
            backlog: proxy.multiplexedBacklog,
            onEvents: { exchange.value.exchange?.drainResponse() },
            onRequestRoom: { exchange.value.exchange?.requestRoom() })
        self.bridge = bridge
        heldResponseBody = nil
        pacedUpload.dropQueued()
        if let prefill {
            for chunk in prefill { push(chunk) }
            endRequestBody()
        }
        var settings = proxy.engine.settings
        // A paced response holds its transfer paused for long stretches: over HTTP/1.1, where pausing is cheap
        // (an HTTP/2 transfer that may share its connection is never paused, see TransferBridge). Not gRPC, which
        // servers speak only over HTTP/2 (forced to HTTP/1.1, every throttled call failed): its messages are small,
        // and a paced one waits in the bridge, or pauses its transfer when it is alone on its connection.
        let grpc = clientHead.headers["content-type"]?.lowercased().hasPrefix("application/grpc") == true
        if downPacer != nil && !grpc { settings.http2 = false }
        // A request announcing trailers (`Trailer`) with a body of unknown length goes over HTTP/1.1, where
        // libcurl sends them after the last chunk (it cannot on HTTP/2).
        if case .chunked = body, clientHead.headers.contains("trailer") { settings.http2 = false }
        var upstream = UpstreamRequest(head: upstreamHead, body: body, settings: settings,
                                       trust: hopPlan.trust, challenge: hopPlan.onChallenge)
        hopStart = Date()
        // A throttle's latency holds every upstream request (each hop), after the rules' delay_ms.
        let waitMs = (delayed ? plan.delayMs : 0) + (throttle?.latencyMs ?? 0)
        if waitMs == 0, clientVersion.major >= 2, case .chunked = body, settings.http2, upstreamHead.url.scheme == "https",
            upPacer == nil, !machine.requestComplete
        {
            // An HTTP/2 client's body of unknown length to a possible HTTP/2 upstream waits for the end of this read
            // from the client: when the body's end came with it (an HTTP/2 DATA frame with END_STREAM: every unary gRPC
            // call), curl learns the length and ends the stream with the last DATA frame. libcurl 7.88 loses an
            // HTTP/2 response whose stream closes while its own upload is still open (it hands on the trailers but
            // drops the head and body: "Empty reply from server"), and a gRPC server answers as soon as it has
            // the message: a third of unary calls failed so.
            eventLoop.assumeIsolated().execute { [self] in
                guard !machine.responseComplete, self.bridge === bridge else { return }
                if let length = bridge.completeRequestLength { upstream.body = .length(length) }
                transfer = proxy.engine.start(upstream, delegate: bridge, on: eventLoop)
            }
        } else if waitMs > 0 {
            eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(waitMs))) { [self] in
                guard !machine.responseComplete, self.bridge === bridge else { return }
                transfer = proxy.engine.start(upstream, delegate: bridge, on: eventLoop)
            }
        } else {
            transfer = proxy.engine.start(upstream, delegate: bridge, on: eventLoop)
        }
        if case .overLimit(let kept) = upload {
            for chunk in kept { push(chunk) }
        }
    }

    /// Hands request body bytes to the bridge, through `upPacer` when the upload is throttled.
    private func push(_ buffer: ByteBuffer) {
        guard upPacer != nil else { return pushToBridge(buffer) }
        pacedUpload.queue.append(buffer)
        releasePacedRequest()
    }

    private func pushToBridge(_ buffer: ByteBuffer) {
        guard let bridge else { return }
        let (resumeCurl, pauseClient) = bridge.pushRequest(buffer)
        if pauseClient && !machine.requestComplete && pacedUpload.hold(.bridge) {
            handler?.pauseReading()
        }
        if resumeCurl { transfer?.resume() }
    }

    private func endRequestBody() {
        if !pacedUpload.queue.isEmpty {
            pacedUpload.endWaits = true
            return
        }
        if let bridge, bridge.endRequest(trailers: clientTrailers) { transfer?.resume() }
    }

    /// Releases queued request bytes as `upPacer` allows (splitting a chunk at the limit); while bytes wait, the
    /// client is not read, so the queue holds at most what one read brought.
    private func releasePacedRequest() {
        guard let upPacer else { return }
        while var first = pacedUpload.queue.first {
            let allowed = upPacer.allow(first.readableBytes) { [weak self] in self?.releasePacedRequest() }
            guard allowed > 0 else { break }
            if allowed == first.readableBytes {
                pacedUpload.queue.removeFirst()
                pushToBridge(first)
            } else {
                let part = first.readSlice(length: allowed)!
                pacedUpload.queue[pacedUpload.queue.startIndex] = first
                pushToBridge(part)
            }
        }
        if pacedUpload.queue.isEmpty {
            if pacedUpload.endWaits {
                pacedUpload.endWaits = false
                endRequestBody()
            }
            if pacedUpload.release(.pacing) { handler?.resumeReading() }
        } else if !pacedUpload.isHeld(by: .pacing) && !machine.requestComplete && pacedUpload.hold(.pacing) {
            handler?.pauseReading()
        }
    }

    /// The bridge's request backlog has room again: read the client, unless the up pacer holds it.
    private func requestRoom() {
        _ = pacedUpload.release(.bridge)
        if !pacedUpload.isHeld(by: .pacing) { handler?.resumeReading() }
    }

    private func stopPacing() {
        downPacer?.cancel()
        upPacer?.cancel()
    }

    /// SPEC: a body over --body-limit that a transform wanted streams unchanged, with a warning on stderr naming the
    /// rules, the URL and the limit.
    private func warnOverBodyLimit(_ direction: String, transform: (any BodyTransforming)?) {
        let rules = (transform?.ruleNames ?? []).map { "'\($0)'" }.joined(separator: ", ")
        proxy.logger.warning("\(direction) body of \(clientHead.method) \(clientHead.url) is over --body-limit (\(proxy.limits.bodyLimit) bytes): rule \(rules) skipped, body sent unchanged")
    }

    private func transform(request kept: BufferedBody) {
        guard let transform = plan.requestBodyTransform else { return }
        run(transform, over: kept, headers: upstreamHead.headers, direction: "request") { [self] result in
            let actions = machine.requestTransformed(result.map(\.bytes))
            if case .success(let transformed) = result, !actions.isEmpty {  // (empty: the client left while it ran)
                upstreamHead.headers = transformed.headers
                transformedRequest = transformed.bytes
            }
            perform(actions)
        }
    }

    private func transform(response head: ResponseHead, _ kept: BufferedBody) {
        guard let transform = plan.responseBodyTransform else { return }
        run(transform, over: kept, headers: head.headers, direction: "response") { [self] result in
            perform(machine.responseTransformed(result.map { transformed in
                var head = head
                head.headers = transformed.headers
                return (head, transformed.bytes)
            }))
        }
    }

    /// Runs a body transform off the loop; back on it, logs what the transform did and hands `done` the result, or
    /// the 500 to answer with.
    private func run(_ transform: any BodyTransforming, over kept: BufferedBody, headers: HeaderFields,
                     direction: String, _ done: @escaping (Result<TransformedBody, ProxyError>) -> Void) {
        kept.transformed(by: transform, headers: headers, pool: proxy.transformPool.pool, eventLoop: eventLoop)
            .assumeIsolated().whenComplete { [self] result in
                if case .success(let transformed) = result {
                    hopEvents += transformed.notes.map { HookEvent(hook: .body, action: "\(direction) body", detail: $0) }
                }
                done(result.mapError { _ in
                    ProxyError(.internalError, "hookproxy: \(direction) body transform failed for \(clientHead.url.authority)")
                })
            }
    }

    private func startNextHop(_ next: RequestHead, _ upload: ExchangeStateMachine.Upload) {
        hopRequest = next
        hopPlan = rules.plan(for: next)
        hopEvents = hopPlan.events
        if let throttle { hopEvents.append(throttleEvent(throttle, global: proxy.configuration.throttle)) }
        outcome = nil
        if let local = hopPlan.localResponse {
            var head = local.head
            plan.editResponse(&head)
            writeHead(head, applyEdits: false)
            writeBody(ByteBuffer(bytes: local.body))
            perform(machine.nextHopAnsweredLocally())
            return
        }
        var head = next
        hopPlan.editRequest(&head)
        proxy.markIfItMayLoop(&head)
        upstreamHead = head
        announceHop()
        startTransfer(upload)
    }

    // MARK: writing to the client

    private func writeHead(_ upstream: ResponseHead, applyEdits: Bool = true) {
        guard let handler else { return }
        var head = upstream
        HopByHop.strip(&head.headers, in: .response)
        if applyEdits { plan.editResponse(&head) }
        if head.status == 204 {
            // RFC 9110 §8.6: a 204 carries no Content-Length. An upstream's `Content-Length: 5` on one made NIO's
            // HTTP/2 codec wait for five bytes that never come, and reset the client's stream.
            head.headers.remove("content-length")
            head.headers.remove("transfer-encoding")
        }
        let hasBody = ResponseHead.hasBody(status: head.status, requestMethod: clientHead.method)
        guard machine.headWillBeWritten(&head, hasBody: hasBody) else { return }
        let hop = machine.hop
        if hop > 0 {
            hopEvents.append(HookEvent(hook: .redirect, action: "redirect followed \(hop) hop\(hop == 1 ? "" : "s")"))
        }
        responseHead = head
        var sent = head
        if clientTakesTrailers { trailersFromHead = GRPCTrailersOnly.split(&sent.headers) }
        handler.send(.head(sent.nioHead(version: clientVersion)))
    }

    /// Writes body bytes, in pieces of at most 64 KiB: the client-side idle timeout counts completed writes, and
    /// one huge write (a transformed body) completes late.
    private func writeBody(_ buffer: ByteBuffer) {
        guard let handler, machine.bodyWillBeWritten(buffer.readableBytes) else { return }
        responseCapture?.append(buffer, limit: proxy.limits.captureLimit)
        var rest = buffer
        while rest.readableBytes > 64 * 1024, let piece = rest.readSlice(length: 64 * 1024) {
            handler.send(.body(.byteBuffer(piece)))
        }
        handler.send(.body(.byteBuffer(rest)))
    }

    // MARK: log

    /// Credentials hookproxy itself adds, and header values rules set from the environment: never logged, even
    /// with --log-secrets.
    private var secretValues: [String] {
        var secrets = plan.secretValues + (machine.hop > 0 ? hopPlan.secretValues : [])
        if let challenge = hopPlan.onChallenge, let password = challenge.password, !password.isEmpty {
            secrets.append(password)
            if let user = challenge.username {
                secrets.append("Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
            }
        }
        if let proxyURL = proxy.configuration.upstream.upstreamProxy, let at = proxyURL.lastIndex(of: "@"),
           let schemeEnd = proxyURL.firstRange(of: "://"), schemeEnd.upperBound < at {
            let userinfo = String(proxyURL[schemeEnd.upperBound..<at])
            if let colon = userinfo.firstIndex(of: ":") { secrets.append(String(userinfo[userinfo.index(after: colon)...])) }
        }
        return secrets
    }

    private func record(response: ResponseHead?, final: Bool) {
        if final {
            proxy.connections.exchangeEnded()
            retainedUntilOutcome = nil
            stopPacing()
        }
        guard proxy.configuration.recorder != nil else { return }  // --quiet without log files: nothing to build
        let hop = machine.hop - (final ? 0 : 1)  // a redirect's record comes as the next hop starts
        let replayBytes = machine.replay?.byteCount ?? 0
        let upstreamURL = upstreamHead.url.description
        let flow = request.record(
            id: startedFlowID ?? proxy.makeFlowID(), response: response,
            bodySize: final ? machine.bodyBytesWritten : 0,
            events: hopEvents, responseBody: final ? responseCapture : nil,
            hop: RequestContext.Hop(
                number: hop, start: hop == 0 ? request.start : hopStart, upstreamRequest: upstreamHead,
                url: hopRequest.url == upstreamHead.url ? upstreamURL : hopRequest.url.description, upstreamURL: upstreamURL,
                requestBodySize: hop == 0 ? requestBodySize : (upstreamHead.method == clientHead.method ? replayBytes : 0),
                requestBody: hop == 0 ? requestCapture : nil, outcome: outcome, rules: hopPlan.firedRules,
                error: final ? machine.failure : nil, secretValues: secretValues))
        startedFlowID = nil
        proxy.record(flow)
    }

    /// The viewer shows a followed redirect's next hop as pending too, under the id its record will keep.
    private func announceHop() {
        guard proxy.viewer?.store.isWatched == true else { return }
        let id = proxy.makeFlowID()
        startedFlowID = id
        proxy.started(request.record(
            id: id, response: nil, bodySize: 0, events: hopEvents,
            hop: RequestContext.Hop(
                number: machine.hop, start: Date(), upstreamRequest: upstreamHead, url: hopRequest.url.description,
                requestBodySize: 0, requestBody: nil, outcome: nil, rules: hopPlan.firedRules, error: nil,
                secretValues: secretValues)))
    }
}

/// A weak reference to an exchange, for callbacks that must not keep it alive (the bridge's, from the curl
/// thread: they hop to the loop, where `NIOLoopBound` lets them read it).
final class WeakExchange {
    weak var exchange: Exchange?
    init(_ exchange: Exchange) { self.exchange = exchange }
}

extension CapturedBody {
    mutating func append(_ buffer: ByteBuffer, limit: Int) {
        let room = limit - bytes.count
        if buffer.readableBytes > room { truncated = true }
        guard room > 0 else { return }
        buffer.withUnsafeReadableBytes { raw in
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw.prefix(room)).assumingMemoryBound(to: UInt8.self))
        }
    }
}
