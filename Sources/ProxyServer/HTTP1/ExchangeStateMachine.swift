import NIOCore
import ProxyModel
import ProxyRules

/// The life of one exchange as a value: what the client's request body and the upstream's response are doing, which
/// hop of a followed redirect chain is under way, whether the client is still there, and how the connection ends.
///
/// Each input returns the actions the driving `Exchange` performs, in order; the machine itself does no I/O, so every
/// transition can be tested as a value. Inputs the network can repeat or reorder (an upstream event after hookproxy
/// answered, a client leaving at any moment) are legal and ignored where they no longer matter. An input that only a
/// bug in the driver can produce is illegal: it names itself (`assertionFailure` in debug builds) and the exchange
/// stops with a 500 and a close, never taking the proxy down.
struct ExchangeStateMachine {
    /// What the client's request body is doing.
    enum RequestState {
        /// Bytes go to the first hop's transfer as they arrive (and are dropped after the first hop).
        case streaming
        /// Kept whole for the request body transform; no transfer has started.
        case buffering(BufferedBody)
        /// Read to its end and being transformed off the event loop; no transfer has started.
        case transforming
        /// Read to its end.
        case complete
    }

    /// What the current hop's response is doing.
    enum ResponseState {
        /// No transfer yet: the request body is kept for its transform first.
        case waitingForRequest
        case awaitingHead
        /// The head is out; body bytes go to the client as they come.
        case streaming
        /// The final response waits whole for the response body transform.
        case buffering(ResponseHead, BufferedBody)
        /// The final response's body is being transformed off the event loop.
        case transforming(ResponseHead)
        /// A 3xx being followed: its body is dropped, and the next hop starts when it ends (or once more than
        /// `redirectBodyDrainLimit` of it came: its transfer, and with it the connection, is then dropped).
        /// `dropped` counts the body bytes so far.
        case following(next: RequestHead, bodyKept: Bool, redirect: ResponseHead, dropped: Int)
        /// The client has its whole answer (or left); what the transfer still reports is ignored.
        case complete
    }

    /// Whether the client connection is still this exchange's.
    enum ClientState: Equatable {
        case connected
        /// The client left after its whole Content-Length body: the exchange waits for curl's outcome (timings and
        /// hook events travel with it) before its log record.
        case awaitingOutcome
        /// The connection went back to the handler (idle or closing).
        case released
        case gone
    }

    /// How the request body reaches a transfer that starts.
    enum Upload {
        /// The client's body as it arrives (or none), after the rule's `delay` when `delayed`.
        case fromClient(delayed: Bool)
        /// The client's body, of which `kept` was read already: it was kept for a transform until it grew over
        /// --body-limit, so it goes unchanged, with a warning.
        case overLimit(kept: [ByteBuffer])
        /// The transformed body, known whole (the driver holds it).
        case transformed
        /// A followed redirect's replay of the original body.
        case replay([ByteBuffer])
        /// A followed redirect that drops the body.
        case none
    }

    /// Which log record to write.
    enum Record {
        /// The exchange's one final record (the response the client got, or the failure).
        case final
        /// A followed 3xx hop's record.
        case redirect(ResponseHead)
    }

    /// What the driver does.
    enum Action {
        case startTransfer(Upload)
        case pushRequestBody(ByteBuffer)
        case endRequestBody
        case transformRequestBody(BufferedBody)
        case cancelTransfer
        case event(HookEvent)
        /// Writes a response head to the client (hop-by-hop headers dropped; the rules' response edits applied when
        /// `applyEdits`); the driver calls `headWillBeWritten` on the way.
        case writeHead(ResponseHead, applyEdits: Bool)
        case writeBody(ByteBuffer)
        /// The response under a transform grew over --body-limit: warn, write `head` and the kept bytes, stream on.
        case streamUnchanged(ResponseHead, kept: [ByteBuffer])
        case transformResponseBody(ResponseHead, BufferedBody)
        /// hookproxy's own answer (head and body) to the client.
        case writeError(ProxyError)
        /// The next hop of a followed redirect: the driver plans it, then starts its transfer or answers it locally.
        case startNextHop(RequestHead, Upload)
        case record(Record)
        /// Closes the client connection once what was written is out, without a clean end (the body is cut short).
        case closeConnection
        /// Hands the connection back (idle, or closing when `close`), writing the response's end unless already sent.
        case finishConnection(close: Bool, endAlreadySent: Bool)
        /// The response is complete before the request body: write its end, and read and drop the rest of the body.
        case endResponseAndDrainRequest
        /// Handle what curl reported so far (the client left; only the outcome is awaited).
        case drain
        /// Several actions in order, from a call that returns one: only its rare paths, so the common one (a body
        /// part) allocates nothing.
        case several([Action])
    }

    /// What the exchange knows when it starts.
    struct Configuration {
        var requestHasBody: Bool
        /// A request body transform applies (and there is a body).
        var transformsRequest: Bool
        var transformsResponse: Bool
        var keepAlive: Bool
        var clientIsHTTP10: Bool
        var bodyLimit: Int
    }

    let configuration: Configuration
    private(set) var request = RequestState.streaming
    private(set) var response = ResponseState.waitingForRequest
    private(set) var client = ClientState.connected
    /// The current hop: 0 for the client's request, n after n followed redirects.
    private(set) var hop = 0
    /// Follows redirects (`on_redirect: follow`); nil when none are followed.
    private(set) var follower: RedirectFollower?
    /// The request body kept for replaying it to a followed redirect's next hop; nil when none may be needed or it
    /// grew past --body-limit.
    private(set) var replay: BufferedBody?
    private(set) var closeAfterResponse: Bool
    private(set) var failure: String?
    private(set) var headWritten = false
    private(set) var bodyBytesWritten = 0
    private var contentLength: Int?
    /// False once a head is out whose response has no body (a HEAD request's, 1xx, 204, 304): no body byte may
    /// follow it, not even an error message's, or an HTTP/1.1 client reads it as the next response.
    private var responseHasBody = true
    private var recorded = false

    init(_ configuration: Configuration, follower: RedirectFollower?) {
        self.configuration = configuration
        self.follower = follower
        self.closeAfterResponse = !configuration.keepAlive
    }

    // MARK: queries

    var requestComplete: Bool {
        switch request {
        case .transforming, .complete: true
        case .streaming, .buffering: false
        }
    }

    var responseComplete: Bool { if case .complete = response { true } else { false } }

    /// Whether upstream reports are still wanted (the client is there, or only the outcome is awaited).
    var wantsUpstreamEvents: Bool { client == .connected || client == .awaitingOutcome }

    /// Whether the client may still be written to.
    var clientConnected: Bool { client == .connected }

    /// Whether an informational (1xx) head may go to the client now: it is there, and no final head is out or decided.
    var mayWriteInformational: Bool {
        guard client == .connected, !headWritten, case .awaitingHead = response else { return false }
        return true
    }

    /// Whether a followed redirect could be sent the request body again.
    var canReplayRequestBody: Bool { !configuration.requestHasBody || replay != nil }

    /// Whether a Content-Length response body has been written whole (the client may then rightly close before
    /// curl reports the end).
    var responseBodyDelivered: Bool {
        if headWritten && !responseHasBody { return true }
        return contentLength.map { bodyBytesWritten >= $0 } ?? false
    }

    // MARK: inputs from the client

    mutating func start() -> [Action] {
        if follower != nil && configuration.requestHasBody { replay = BufferedBody(limit: configuration.bodyLimit) }
        if configuration.transformsRequest {
            request = .buffering(BufferedBody(limit: configuration.bodyLimit))
            return []
        }
        response = .awaitingHead
        return [.startTransfer(.fromClient(delayed: true))]
    }

    mutating func requestBodyPart(_ buffer: ByteBuffer) -> Action? {
        if var kept = replay {
            replay = nil  // `kept` is then the only owner of its chunks: no copy per part
            if kept.append(buffer) { replay = kept }
        }
        switch request {
        case .streaming:
            guard hop == 0, !responseComplete else { return nil }
            return .pushRequestBody(buffer)
        case .buffering(var kept):
            request = .streaming  // likewise
            if kept.append(buffer) {
                request = .buffering(kept)
                return nil
            }
            response = .awaitingHead
            return .startTransfer(.overLimit(kept: kept.chunks))
        case .transforming, .complete:
            return illegal("request body part after the request's end")
        }
    }

    mutating func requestEnd() -> [Action] {
        var actions: [Action] = []
        switch request {
        case .buffering(let kept):
            request = .transforming
            actions.append(.transformRequestBody(kept))
        case .streaming:
            request = .complete
            if hop == 0 { actions.append(.endRequestBody) }
        case .transforming, .complete:
            return [illegal("request end after the request's end")]
        }
        if responseComplete && client == .connected {
            client = .released
            actions.append(.finishConnection(close: closeAfterResponse, endAlreadySent: true))
        }
        return actions
    }

    /// The request body transform finished: `body` (the driver keeps the bytes) or a failure.
    mutating func requestTransformed(_ result: Result<ByteBuffer, ProxyError>) -> [Action] {
        // The client may have left while the transform ran: then no transfer starts (nothing would drain it).
        guard client == .connected, !responseComplete else { return [] }
        guard case .transforming = request else { return [illegal("request transformed while \(request)")] }
        request = .complete
        switch result {
        case .failure(let error):
            return fail(error)
        case .success(let body):
            if replay != nil {
                var transformed = BufferedBody(limit: .max)
                transformed.append(body)
                replay = transformed
            }
            response = .awaitingHead
            return [.startTransfer(.transformed)]
        }
    }

    /// The client connection closed (or reset). `requestProgress` says how much of the request body had come (`500000
    /// of 1000000 bytes`): the log names an upload cut short.
    mutating func clientClosed(requestProgress: String? = nil) -> [Action] {
        guard client == .connected else { return [] }
        if responseComplete {
            client = .gone
            return []
        }
        if responseBodyDelivered, requestComplete, case .streaming = response {
            client = .awaitingOutcome
            return [.drain]
        }
        if !responseBodyDelivered {
            failure = failure ?? (requestComplete ? "client closed the connection"
                : "client closed the connection before the end of its request body (\(requestProgress ?? "cut short"))")
        }
        response = .complete
        request = .complete
        client = .gone
        return [.cancelTransfer] + record(.final)
    }

    /// The handler is about to close a client that stalled: the log says why (instead of "client closed").
    mutating func clientTimedOut(_ reason: String) {
        failure = failure ?? "hookproxy: \(reason)"
    }

    /// hookproxy is about to refuse what the client sent within this request (the parser's 400, a bad chunk size in
    /// its body) and close: the log gives hookproxy's message instead of "client closed the connection".
    mutating func clientRefused(_ message: String) {
        failure = failure ?? message
    }

    // MARK: inputs from the upstream

    /// What the driver found in a response head before the machine sees it.
    enum HeadVerdict {
        /// Framing that must never reach the client (it could read a second response out of it).
        case malformed(ProxyError)
        /// A hook decided (`on_redirect`, `on_challenge: cancel`).
        case decided(HookDecisions.Decision)
        /// Hand it on; `hasBody` from its status and the request method.
        case pass(hasBody: Bool)
    }

    mutating func upstreamHead(_ head: ResponseHead, _ verdict: HeadVerdict) -> [Action] {
        guard case .awaitingHead = response else { return [] }
        switch verdict {
        case .malformed(let error):
            // Dropping the transfer also drops its upstream connection (RFC 9112 §6.3).
            return [.cancelTransfer] + fail(error)
        case .decided(.passRewritten(let rewritten, let event)):
            response = .streaming
            return [.event(event), .writeHead(rewritten, applyEdits: true)]
        case .decided(.follow(let next, let bodyKept, let follower)):
            self.follower = follower
            response = .following(next: next, bodyKept: bodyKept, redirect: head, dropped: 0)
            return []
        case .decided(.answer(let error, let event)):
            return (event.map { [.event($0)] } ?? []) + [.cancelTransfer] + fail(error)
        case .pass(let hasBody):
            if configuration.transformsResponse, hop == 0 || follower != nil, hasBody {
                response = .buffering(head, BufferedBody(limit: configuration.bodyLimit))
                return []
            }
            response = .streaming
            return [.writeHead(head, applyEdits: true)]
        }
    }

    /// How much of a followed 3xx's body is read (and dropped) so its connection can be reused: a larger one, or
    /// one that never ends, is cut off and the next hop starts at once.
    static let redirectBodyDrainLimit = 64 * 1024

    mutating func upstreamBody(_ buffer: ByteBuffer) -> Action? {
        switch response {
        case .streaming:
            return .writeBody(buffer)
        case .buffering(let head, var kept):
            response = .streaming  // `kept` is then the only owner of its chunks: no copy per part
            if kept.append(buffer) {
                response = .buffering(head, kept)
                return nil
            }
            return .streamUnchanged(head, kept: kept.chunks)
        case .following(let next, let bodyKept, let redirect, let dropped):
            let total = dropped + buffer.readableBytes
            guard total > Self.redirectBodyDrainLimit else {
                response = .following(next: next, bodyKept: bodyKept, redirect: redirect, dropped: total)
                return nil
            }
            return .several([.cancelTransfer] + nextHop(next, bodyKept: bodyKept, redirect: redirect))
        case .waitingForRequest, .awaitingHead, .transforming, .complete:
            return nil
        }
    }

    /// A followed 3xx is done with (its transfer ended, or was cut off): its record, then the next hop.
    private mutating func nextHop(_ next: RequestHead, bodyKept: Bool, redirect: ResponseHead) -> [Action] {
        hop += 1
        response = .awaitingHead
        let upload: Upload = bodyKept && (replay?.byteCount ?? 0) > 0 ? .replay(replay!.chunks) : .none
        return [.record(.redirect(redirect)), .startNextHop(next, upload)]
    }

    /// The transfer ended: `error` when it failed; `closedEarly` is the error when it ended before a head.
    mutating func upstreamEnd(error: ProxyError?, closedEarly: @autoclosure () -> ProxyError) -> [Action] {
        switch response {
        case .awaitingHead:
            return fail(error ?? closedEarly())
        case .streaming:
            guard let error else { return complete() }
            // The head is out: all the client can learn is that the body ended early.
            failure = error.message
            response = .complete
            return record(.final) + [.closeConnection]
        case .buffering(let head, let kept):
            if let error { return fail(error) }
            response = .transforming(head)
            return [.transformResponseBody(head, kept)]
        case .following(let next, let bodyKept, let redirect, _):
            return nextHop(next, bodyKept: bodyKept, redirect: redirect)
        case .waitingForRequest, .transforming:
            return [illegal("upstream end while \(response)")]
        case .complete:
            return []
        }
    }

    /// The response body transform finished: the transformed head and body, or a failure.
    mutating func responseTransformed(_ result: Result<(ResponseHead, ByteBuffer), ProxyError>) -> [Action] {
        guard client == .connected else { return [] }
        guard case .transforming = response else { return [illegal("response transformed while \(response)")] }
        switch result {
        case .failure(let error):
            return fail(error)
        case .success(let (head, body)):
            response = .streaming
            return [.writeHead(head, applyEdits: true), .writeBody(body)] + complete()
        }
    }

    /// A followed redirect's next hop was answered by a rule (`mock`, `block`), its head and body written.
    mutating func nextHopAnsweredLocally() -> [Action] {
        guard case .awaitingHead = response else { return [illegal("local answer while \(response)")] }
        response = .streaming
        return complete()
    }

    // MARK: writing to the client

    /// Whether writes returned with an input still reach the client: it is connected, or the connection is handed
    /// back by the same input's `finishConnection`, which the driver performs after the writes before it.
    private var clientTakesWrites: Bool { client == .connected || client == .released }

    /// Called as the driver writes a head: decides, once, whether the connection stays open, and says so in
    /// `Connection`. Returns false when the head must not be written (one is out, or the client is gone).
    mutating func headWillBeWritten(_ head: inout ResponseHead, hasBody: Bool) -> Bool {
        guard clientTakesWrites, !headWritten else { return false }
        headWritten = true
        responseHasBody = hasBody
        contentLength = head.headers["content-length"].flatMap(Int.init)
        if hasBody && contentLength == nil && configuration.clientIsHTTP10 {
            closeAfterResponse = true  // an HTTP/1.0 client: the body ends when the connection closes
        }
        if closeAfterResponse {
            head.headers.set("Connection", "close")
        } else if configuration.clientIsHTTP10 {
            head.headers.set("Connection", "keep-alive")
        }
        return true
    }

    /// Called as the driver writes body bytes; false when they must not be written.
    mutating func bodyWillBeWritten(_ count: Int) -> Bool {
        guard clientTakesWrites, headWritten, responseHasBody, count > 0 else { return false }
        bodyBytesWritten += count
        return true
    }

    // MARK: shared steps

    /// Answers the client with hookproxy's own error response (or, when a head is out, cuts the body short).
    private mutating func fail(_ error: ProxyError) -> [Action] {
        failure = error.message
        if headWritten {
            response = .complete
            return record(.final) + [.closeConnection]
        }
        if !requestComplete { closeAfterResponse = true }
        response = .streaming
        return [.writeError(error)] + complete()
    }

    private mutating func complete() -> [Action] {
        response = .complete
        var actions = record(.final)
        guard client == .connected else { return actions }
        if requestComplete || closeAfterResponse {
            client = .released
            actions.append(.finishConnection(close: closeAfterResponse, endAlreadySent: false))
        } else {
            // The upstream answered before the request body was done (a 413 to an upload, say): the rest of the
            // body is read and dropped, so a client that writes its whole body before reading gets its answer.
            actions.append(.endResponseAndDrainRequest)
        }
        return actions
    }

    private mutating func record(_ record: Record) -> [Action] {
        if case .final = record {
            guard !recorded else { return [] }
            recorded = true
            if client == .awaitingOutcome { client = .gone }
        }
        return [.record(record)]
    }

    /// An input only a driver bug can produce: named, and the exchange stops (a 500 and a close).
    private mutating func illegal(_ what: String, function: String = #function) -> Action {
        assertionFailure("ExchangeStateMachine.\(function): \(what)")
        failure = "hookproxy: internal error: \(function): \(what)"
        response = .complete
        request = .complete
        if client == .connected { client = .released }
        return .finishConnection(close: true, endAlreadySent: false)
    }
}
