import FoundationEssentials
import Glibc
import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUI
import ProxyUpstream

/// Serves the requests of one client connection, one at a time (`PipeliningGate` queues the rest):
/// classifies each head (absolute-form, origin-form, CONNECT, hookproxy's own address), answers locally or hands
/// the exchange to the upstream engine, and streams bodies both ways with backpressure.
/// Event-loop bound.
final class ProxyRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where the connection is in its current request.
    enum State {
        case idle
        /// Reading (and dropping) the request body; the local answer goes out at the request's end.
        case answeringLocally(LocalResponse, keepAlive: Bool, events: [HookEvent], RequestContext)
        /// The request goes upstream (body still arriving, or response under way).
        case exchanging(Exchange)
        /// A request asking for an upgrade (WebSocket, …): its handshake is under way upstream.
        case upgrading(UpgradeHandshake)
        /// A CONNECT head arrived; the tunnel starts at its end.
        case connectRequested(RequestContext)
        /// A CONNECT is being set up or the connection became a tunnel: HTTP handling is over.
        case tunnelling
        /// The connection closes once the last response is out; whatever the client still sends is dropped.
        case closing
        /// `GET /api/events` arrived: the stream starts at the request's end.
        case eventsRequested(RequestContext)
        /// A viewer API request: its answer is made off the event loop at the request's end (`ViewerGate.queue`).
        case viewerRequested(@Sendable () -> LocalResponse, keepAlive: Bool, RequestContext)
        /// The viewer's answer is being made; whatever the client still sends waits in `PipeliningGate`.
        case awaitingViewer
        /// The connection carries the viewer's event stream until the client leaves or hookproxy shuts down.
        case streamingEvents(EventStream)
        /// `GET /api/har` arrived: its download starts at the request's end.
        case downloadRequested(ResponseHead, FlowDownload, keepAlive: Bool, RequestContext)
        /// A download is being written, a part at a time as the client takes them.
        case downloading(DownloadStream, keepAlive: Bool)
    }

    let proxy: ProxyContext
    /// `https` when this connection is an intercepted TLS tunnel: origin-form requests then mean https.
    let impliedScheme: String
    let impliedAuthority: String?
    /// Set on a connection to a `--reverse` listener: every request goes to this route's URL.
    let reverse: ReverseRoute?
    private(set) var state: State = .idle
    /// Set while the handler is in the pipeline. Dropped in `handlerRemoved`: the context holds this handler, so
    /// keeping it would keep both (and the channel) alive after the connection closed.
    private var context: ChannelHandlerContext?
    /// The connection's event loop (kept after removal, unlike the context: it holds nothing of this handler).
    private var eventLoop: (any EventLoop)!
    private var readPaused = false
    private var readPending = false
    /// The current request ends this connection's use (an `Upgrade` hookproxy does not carry): once it is read,
    /// reading stops for good, so whatever the client sends after it cannot pile up in the stopped decoder.
    private var closesAfterRequest = false
    /// Set once such a request has been read: nothing (not even the upstream draining the body) resumes reading.
    private var readsStopped = false
    /// The client's address as the log writes it, made once per connection (formatting it is ~2 % of a request).
    private var clientAddressText: String?
    private var clientAddress: String {
        if let clientAddressText { return clientAddressText }
        let text = context?.channel.remoteAddress?.description ?? "?"
        clientAddressText = text
        return text
    }

    init(context: ProxyContext, impliedScheme: String = "http", impliedAuthority: String? = nil,
         reverse: ReverseRoute? = nil) {
        self.proxy = context
        self.impliedScheme = impliedScheme
        self.impliedAuthority = impliedAuthority
        self.reverse = reverse
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.eventLoop = context.eventLoop
        awaitHead()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headTimer?.cancel()
        headTimer = nil
        self.context = nil
    }

    // MARK: client-side timeouts

    /// Closes the connection unless a request head arrives in time (slowloris, a silent connection holding a
    /// --max-connections slot, a stalled TLS handshake on an intercepted tunnel, an idle keep-alive connection).
    /// One timer per connection, not one per request (scheduling and cancelling a task cost ~1 % of a request): a
    /// head that arrives in time only clears `awaitingHeadSince`, and the timer, when it fires, closes the
    /// connection or sets itself again for the wait under way, if there is one.
    private var headTimer: Scheduled<Void>?
    /// When the wait for the next request head began; nil while a request is under way.
    private var awaitingHeadSince: NIODeadline?

    private func awaitHead() {
        guard let context else { return }  // the connection is gone
        let now = context.eventLoop.now
        awaitingHeadSince = now
        if headTimer == nil { armHeadTimer(at: now + .milliseconds(Int64(proxy.limits.headerTimeoutMs))) }
    }

    private func armHeadTimer(at deadline: NIODeadline) {
        guard let context else { return }
        headTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            headTimer = nil
            guard let since = awaitingHeadSince, case .idle = state, let context = self.context else { return }
            let timeout = proxy.limits.headerTimeoutMs
            let due = since + .milliseconds(Int64(timeout))
            guard due <= context.eventLoop.now else { return armHeadTimer(at: due) }
            proxy.logger.debug("\(context.channel.remoteAddress?.description ?? "client"): no request head within \(timeout) ms (--header-timeout): closing")
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let refused = event as? ProtocolErrorHandler.RequestRefused {
            // The connection closes after the parser's 400: what is under way ends now, saying why.
            switch state {
            case .exchanging(let exchange): exchange.clientRefused(refused.error)
            case .upgrading(let handshake): handshake.clientClosed()
            default: return
            }
            state = .closing
            return
        }
        guard let idle = event as? IdleStateHandler.IdleStateEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let seconds = Double(proxy.limits.clientIdleTimeoutMs) / 1000
        switch (idle, state) {
        case (.read, .exchanging(let exchange)) where !exchange.requestBodyComplete && !readPaused:
            exchange.clientTimedOut("client sent no request body bytes for \(seconds) s (--idle-timeout)")
            context.close(promise: nil)
        case (.read, .answeringLocally), (.read, .connectRequested), (.read, .viewerRequested), (.read, .downloadRequested):
            context.close(promise: nil)
        case (.write, .downloading(let stream, _)) where !context.channel.isWritable:
            // The client stopped reading a download: its connection (and the part it holds) is not kept.
            stream.stop()
            ImmediateClose.close(context.channel)
        case (.write, .exchanging(let exchange)) where !context.channel.isWritable || exchange.responseIsComplete:
            // The client stopped reading: curl does not time out a paused transfer, so hookproxy ends it.
            exchange.clientTimedOut("client read nothing for \(seconds) s (--idle-timeout)")
            ImmediateClose.closeUnlessReading(context.channel)
        case (.write, .upgrading(let handshake)) where !context.channel.isWritable:
            // The client stopped reading the server's refusal of its upgrade: the upstream is not held for it.
            handshake.clientClosed()
            ImmediateClose.close(context.channel)
        case (.write, .closing), (.write, .idle):
            // Nothing written completed for the idle timeout: a client that stopped reading the end of a response
            // (or an idle keep-alive connection) is not kept. One that reads gets TLS's close_notify and its wait.
            ImmediateClose.closeUnlessReading(context.channel)
        default:
            break
        }
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), state) {
        case (.head(let head), .idle):
            receive(head)
        case (.body(let buffer), .exchanging(let exchange)):
            exchange.receiveRequestBody(buffer)
        case (.end(let trailers), .exchanging(let exchange)):
            if closesAfterRequest { stopReading() }
            exchange.finishRequestBody(trailers: trailers)
        case (.end, .upgrading):
            stopReading()
        case (.body, .upgrading):
            break
        case (.end, .answeringLocally(let response, let keepAlive, let events, let request)):
            if closesAfterRequest { stopReading() }
            writeLocal(response, keepAlive: keepAlive, events: events, request: request)
        case (.end, .connectRequested(let request)):
            state = .tunnelling
            // Until the 200 is written nothing more is read from the client, however long the connect takes: the
            // decoder stopped at the CONNECT head, and `PipeliningGate` holds every read after such a head while its
            // response is due (ConnectSetupBoundTests). What the client sends meanwhile waits in the kernel, held
            // back by TCP.
            // Not from inside the decoder's callback: the tunnel replaces the HTTP handlers, the decoder included.
            context.eventLoop.assumeIsolated().execute { [self] in
                guard let context = self.context else { return }
                ConnectTunnel.open(request: request, handler: self, context: context)
            }
        case (.body(let buffer), .answeringLocally(let response, let keepAlive, let events, var request)):
            // Drop the state's own copy first: `request` is then the only owner of its captured body, and appending
            // does not copy it for every part (quadratic on the event loop for a 1-byte-chunked body).
            state = .closing
            request.requestBodySize += buffer.readableBytes
            if proxy.configuration.captureBodies {
                if request.requestBody == nil { request.requestBody = CapturedBody() }
                request.requestBody!.append(buffer, limit: proxy.limits.captureLimit)
            }
            state = .answeringLocally(response, keepAlive: keepAlive, events: events, request)
        case (.end, .eventsRequested(let request)):
            startEventStream(version: request.head.version)
        case (.end, .viewerRequested(let make, let keepAlive, let request)):
            if closesAfterRequest { stopReading() }
            answerViewer(make, keepAlive: keepAlive, request: request)
        case (.end, .downloadRequested(let head, let download, let keepAlive, let request)):
            if closesAfterRequest { stopReading() }
            startDownload(head, download, keepAlive: keepAlive, request: request)
        case (.body, .connectRequested), (_, .tunnelling), (_, .closing), (.body, .eventsRequested), (_, .streamingEvents),
             (.body, .viewerRequested), (_, .awaitingViewer), (.body, .downloadRequested), (_, .downloading):
            break
        case (.head, _), (.body, .idle), (.end, .idle):
            illegalTransition("request part in state \(state)")
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .exchanging(let exchange) = state { exchange.clientClosed() }
        if case .upgrading(let handshake) = state { handshake.clientClosed() }
        if case .streamingEvents(let stream) = state { stream.stop() }
        if case .downloading(let stream, _) = state { stream.stop() }
        // Not `.idle`: the decoder may still hand on parts of what it read before the close (the body of a request
        // answered and closed at once, RequestFraming), and they are dropped, not taken for a protocol error.
        state = .closing
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .exchanging(let exchange) = state { exchange.drainResponse() }
        if context.channel.isWritable, case .streamingEvents(let stream) = state { stream.drain() }
        if context.channel.isWritable, case .downloading(let stream, _) = state { stream.writable() }
        if context.channel.isWritable, case .upgrading(let handshake) = state { handshake.clientWritable() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        proxy.logger.debug("connection error: \(error)")
        // Closed on the loop's next turn, not from inside the error: an HTTP/2 stream whose first HEADERS NIO's codec
        // refused (no `:authority`) is not open yet, and closing it now tells NIO's connection manager "closed" for
        // a stream it never heard "created" of (an assertion in a debug build). The channel, not this context: the
        // handler may be out of the pipeline by then.
        let channel = context.channel
        context.eventLoop.assumeIsolated().execute { channel.close(promise: nil) }
    }

    // MARK: outbound: reads are forwarded only while the upstream keeps up with the request body

    func read(context: ChannelHandlerContext) {
        if readPaused { readPending = true } else { context.read() }
    }

    func pauseReading() { readPaused = true }

    private func stopReading() {
        readPaused = true
        readsStopped = true
    }

    func resumeReading() {
        // After an Upgrade request hookproxy does not carry, reading stays off for good (the decoder has stopped).
        guard !readsStopped else { return }
        readPaused = false
        if readPending {
            readPending = false
            context?.read()
        }
    }

    // MARK: classify a request head

    private func receive(_ nioHead: HTTPRequestHead) {
        awaitingHeadSince = nil
        defer {
            // An answer of hookproxy's own that waits for the request's end (an exchange asked in `startExchange`).
            switch state {
            case .answeringLocally, .viewerRequested: continueIfExpected(nioHead)
            default: break
            }
        }
        let request = RequestContext(head: nioHead, client: clientAddress, start: Date())
        // An `Upgrade` that hookproxy does not carry: NIO's decoder stops parsing after such a request, so the
        // request is answered (forwarded without the upgrade, or locally) and the connection closes; nothing read
        // after it is kept.
        let upgrade = nioHead.headers.contains(name: "upgrade")
        if upgrade { closesAfterRequest = true }
        let keepAlive = nioHead.isKeepAlive && !upgrade
        if nioHead.version.major == 2, HTTP2Limits.headerListSize(nioHead) > proxy.limits.maxHeaderBytes {
            // HTTP/2's NIO decoder takes heads past the limit (up to `HTTP2Limits.decodedHeaderBytes`): this stream
            // alone gets the 431 an HTTP/1.1 client gets, not its whole connection a COMPRESSION_ERROR.
            let error = ProxyError(.headersTooLarge, "hookproxy: request headers exceed \(proxy.limits.maxHeaderBytes) bytes (--max-header-bytes)")
            proxy.logger.warning("\(request.client): \(error.message)")
            state = .answeringLocally(.error(error), keepAlive: false, events: [], request)
            return
        }
        // A request carrying hookproxy's own loop marker left through hookproxy itself (a followed redirect's hop,
        // a `map_remote` to its own port): it is a proxied request, never the viewer's, and the classifier answers
        // it 508. (Otherwise a server could redirect a followed request to `/api/flows` and read every flow.)
        let cameBack = nioHead.headers["via"].contains { $0.contains(proxy.loopMarker) }
        if let viewer = proxy.viewer, impliedAuthority == nil, reverse == nil, !cameBack {
            // The viewer's own requests are answered before --proxy-auth (they carry Authorization, not
            // Proxy-Authorization) and are never flows.
            var request = request
            request.isViewerRequest = true
            switch ViewerGate.decide(nioHead, viewer: viewer, listening: proxy.listeningAddress,
                                     credentials: proxy.configuration.proxyAuth, ca: proxy.certificateAuthority) {
            case .notViewer: break
            case .answer(let response):
                state = .answeringLocally(response, keepAlive: keepAlive, events: [], request)
                return
            case .events:
                state = .eventsRequested(request)
                return
            case .deferred(let make):
                state = .viewerRequested(make, keepAlive: keepAlive, request)
                return
            case .download(let head, let download):
                state = .downloadRequested(head, download, keepAlive: keepAlive, request)
                return
            }
        }
        if let refusal = checkProxyAuth(nioHead) {
            // NIO frames any answer to CONNECT as bodiless: close instead, so the client knows where it ends
            state = .answeringLocally(refusal, keepAlive: keepAlive && nioHead.method != .CONNECT, events: [], request)
            return
        }
        if nioHead.method == .CONNECT {
            if let reverse {
                // A reverse listener stands where a server stands: it is no proxy, and opens no tunnel.
                let message = "hookproxy: CONNECT is not served on a reverse listener (it forwards to \(reverse.target))"
                state = .answeringLocally(.error(ProxyError(.badRequest, message)), keepAlive: false, events: modeEvents, request)
                return
            }
            if let tunnel = impliedAuthority {
                // Inside an intercepted tunnel a CONNECT would open a second tunnel to any host it names: the tunnel
                // reaches only its own target (421, as for an absolute-form request naming another origin).
                let message = "hookproxy: misdirected request: CONNECT \(nioHead.uri.prefix(200)) inside the tunnel to \(tunnel) (CONNECT names the only server a tunnel reaches; send it to hookproxy on a connection of its own)"
                state = .answeringLocally(.error(ProxyError(.misdirected, message)), keepAlive: false, events: modeEvents, request)
                return
            }
            state = .connectRequested(request)
            // A blind tunnel carries the client's half-close: from this head on, an end of input is held for it
            // (not inside an intercepted tunnel, whose TLS does not carry one).
            if impliedAuthority == nil, let channel = context?.channel { ClientEndOfInput.hold(channel) }
            return
        }
        if let refusal = RequestFraming.refusal(nioHead) {
            // Answered at once, not after the body: a body hookproxy cannot pass on may never end (a Content-Length
            // past 2^63). The connection closes; what the client still sends is dropped.
            proxy.logger.warning("\(request.client): \(refusal.message)")
            writeLocal(.error(refusal), keepAlive: false, events: modeEvents, request: request, error: refusal.message)
            return
        }
        let kind = if let reverse {
            // A marked request is a loop only if this route leads to a listener again (a client may well proxy
            // through hookproxy to its own reverse listener, whose route goes elsewhere).
            RequestClassifier.classify(nioHead, reverse: reverse,
                                       loopMarker: proxy.isOwnPort(reverse.target.port) ? proxy.loopMarker : "")
        } else {
            RequestClassifier.classify(nioHead, impliedScheme: impliedScheme, impliedAuthority: impliedAuthority,
                                       listening: proxy.listeningAddress, loopMarker: proxy.loopMarker)
        }
        switch kind {
        case .loop:
            let message = "hookproxy: loop detected: the request came back to hookproxy itself (\(nioHead.uri.prefix(200)))"
            proxy.logger.warning("\(message)")
            state = .answeringLocally(.error(ProxyError(.loopDetected, message)), keepAlive: false, events: modeEvents, request)
        case .invalid(let message):
            state = .answeringLocally(.error(ProxyError(.badRequest, "hookproxy: bad request: \(message)")), keepAlive: false, events: modeEvents, request)
        case .misdirected(let message):
            state = .answeringLocally(.error(ProxyError(.misdirected, message)), keepAlive: keepAlive, events: modeEvents, request)
        case .ownAddress(let path):
            state = .answeringLocally(OnboardingPage.response(for: path, ca: proxy.certificateAuthority), keepAlive: keepAlive, events: [], request)
        case .forward(let clientHead):
            let bodiless = RequestFraming.body(of: nioHead, method: clientHead.method) == .none
            if let token = UpgradeHandshake.upgradeToken(nioHead, bodiless: bodiless) {
                startUpgrade(UpgradeHandshake.restoringUpgrade(clientHead, from: nioHead), token: token, request: request)
            } else {
                startExchange(clientHead, nioHead: nioHead, keepAlive: keepAlive, request: request)
            }
        }
    }

    /// A request asking for an upgrade hookproxy carries (WebSocket, or another protocol relayed as bytes): rules
    /// match and edit its handshake like any request; it leaves on a connection curl makes.
    private func startUpgrade(_ clientHead: RequestHead, token: String, request: RequestContext) {
        let rules = proxy.currentRules
        var plan = rules.plan(for: clientHead)
        if impliedAuthority != nil { plan.events.insert(HookEvent(hook: .intercept, action: "intercepted"), at: 0) }
        plan.events.insert(contentsOf: modeEvents, at: 0)
        let request = request.with(clientHead: clientHead, plan: plan)
        if let local = plan.localResponse {
            state = .answeringLocally(local, keepAlive: false, events: plan.events, request)
            return
        }
        var upstreamHead = clientHead
        plan.editRequest(&upstreamHead)
        proxy.markIfItMayLoop(&upstreamHead)
        let handshake = UpgradeHandshake(proxy: proxy, handler: self, eventLoop: eventLoop, plan: plan,
                                         request: request, upstreamHead: upstreamHead, protocolName: token)
        state = .upgrading(handshake)
        handshake.start()
    }

    private func startExchange(_ clientHead: RequestHead, nioHead: HTTPRequestHead, keepAlive: Bool, request: RequestContext) {
        let rules = proxy.currentRules
        var plan = rules.plan(for: clientHead)
        if impliedAuthority != nil { plan.events.insert(HookEvent(hook: .intercept, action: "intercepted"), at: 0) }
        plan.events.insert(contentsOf: modeEvents, at: 0)
        if let local = plan.localResponse {
            state = .answeringLocally(local, keepAlive: keepAlive, events: plan.events,
                                      request.with(clientHead: clientHead, plan: plan))
            return
        }
        // hookproxy takes the body whatever the upstream will say (curl does its own Expect upstream): before the
        // exchange starts, so that no answer of its own can precede the 100.
        continueIfExpected(nioHead)
        let exchange = Exchange(proxy: proxy, handler: self, eventLoop: eventLoop, rules: rules, clientHead: clientHead,
                                keepAlive: keepAlive, plan: plan,
                                request: request.with(clientHead: clientHead, plan: plan))
        state = .exchanging(exchange)
        exchange.start()
    }

    /// `Expect: 100-continue`: hookproxy reads a request's body before it answers, whoever answers (the upstream, or
    /// hookproxy itself: a mock, a 407, a 400 that waits for the body's end), so it asks for the body at once.
    /// Without it a client waits for its own timeout first (curl: 1 s for every upload over 1 MiB to a mock).
    /// Never to an HTTP/1.0 client (RFC 9110 §10.1.1: it ignores the expectation, and would read a 100 as the
    /// response).
    private func continueIfExpected(_ head: HTTPRequestHead) {
        guard head.version != .http1_0, let expect = head.headers.first(name: "expect"),
              expect.lowercased() == "100-continue" else { return }
        send(.head(HTTPResponseHead(version: head.version, status: .continue)))
        flush()
    }

    /// The event that marks every exchange of a reverse listener in the logs (`reverse` on the console line).
    private var modeEvents: [HookEvent] {
        reverse == nil ? [] : [HookEvent(hook: .reverse, action: "reverse")]
    }

    /// `--proxy-auth`: the client's CONNECT (or plain proxy request) must carry the credentials. Requests inside an
    /// intercepted tunnel are not asked again: the CONNECT that opened it was checked, and clients never send
    /// Proxy-Authorization inside TLS. Nor are requests to a reverse listener: their clients do not know a proxy is
    /// there, and the listener reaches only its route's URL, so it is no open proxy.
    private func checkProxyAuth(_ head: HTTPRequestHead) -> LocalResponse? {
        guard impliedAuthority == nil, reverse == nil, let credentials = proxy.configuration.proxyAuth else { return nil }
        if let header = head.headers.first(name: "proxy-authorization"), ProxyAuth.matches(header, credentials) {
            return nil
        }
        return .error(ProxyError(.proxyAuthRequired, "hookproxy: proxy authentication required"),
                      headers: [("Proxy-Authenticate", "Basic realm=\"hookproxy\"")])
    }

    // MARK: responses

    /// Writes a response part without flushing.
    func send(_ part: HTTPServerResponsePart) {
        context?.write(wrapOutboundOut(part), promise: nil)
    }

    /// Writes and flushes the response's end; the future completes when it is on the wire.
    func sendEnd(trailers: HTTPHeaders? = nil) -> EventLoopFuture<Void> {
        guard let context else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        return context.writeAndFlush(wrapOutboundOut(.end(trailers)))
    }

    func flush() { context?.flush() }

    /// Called by the exchange when its response is complete and the request has been read: the connection goes
    /// back to idle *before* the response's end is written, because writing it releases the next pipelined request.
    func exchangeFinished(_ exchange: Exchange, close: Bool, endAlreadySent: Bool = false, trailers: HTTPHeaders? = nil) {
        guard case .exchanging(let current) = state, current === exchange else { return }
        state = close ? .closing : .idle
        if !close { resumeReading() }
        guard let context = self.context else { return }
        let ended = endAlreadySent ? context.eventLoop.makeSucceededVoidFuture() : sendEnd(trailers: trailers)
        // The next request's deadline starts when this response is on the wire, not when it is queued: a client
        // still reading a long tail is not cut off (a client that stops reading meets the write-idle timeout).
        // Closing under a request body still coming (an error ended the exchange early) would reset the connection,
        // and the reset could destroy the answer before a client that uploads first and reads after gets to it.
        let bodyStillComing = close && !exchange.requestBodyComplete
        ended.assumeIsolated().whenComplete { [self] _ in
            if bodyStillComing {
                LingeringClose.startDiscardingRequests(context, proxy: proxy)
            } else if close {
                context.close(promise: nil)
            } else if case .idle = state {
                awaitHead()
            }
        }
    }

    /// hookproxy's own answer to a CONNECT it could not carry out (bad target, connect failure, no interception):
    /// written, logged with its reason as the record's error, and the connection closed.
    func answerConnect(_ error: ProxyError, request: RequestContext) {
        writeLocal(.error(error), keepAlive: false, events: [], request: request, error: error.message)
    }

    private func writeLocal(_ response: LocalResponse, keepAlive: Bool, events: [HookEvent], request: RequestContext,
                            error: String? = nil) {
        // A refused CONNECT (407) closes: the decoder stops parsing after a CONNECT head, and its body can only be
        // close-delimited (see sendBodyBelowEncoder).
        let isConnect = request.head.method == .CONNECT
        let keepAlive = keepAlive && !isConnect
        state = keepAlive ? .idle : .closing
        var head = response.head
        let version = request.head.version
        if !keepAlive {
            head.headers.set("Connection", "close")
        } else if version == .http1_0 {
            head.headers.set("Connection", "keep-alive")  // RFC 9112 §9.3: a 1.0 client closes otherwise
        }
        send(.head(head.nioHead(version: version)))
        let sent = request.head.method == .HEAD ? [] : response.body
        if !sent.isEmpty {
            if isConnect && version.major < 2 {  // (HTTP/2 frames a CONNECT's refusal as any response)
                sendBodyBelowEncoder(sent)
            } else {
                send(.body(.byteBuffer(ByteBuffer(bytes: sent))))
            }
        }
        guard let context = self.context else { return }
        sendEnd().assumeIsolated().whenComplete { [self] _ in
            if !keepAlive { context.close(promise: nil) } else if case .idle = state { awaitHead() }
        }
        // The file logs capture a local answer's body (a mock) like any other, up to the capture limit.
        let limit = proxy.limits.captureLimit
        let captured = proxy.configuration.captureBodies
            ? CapturedBody(bytes: Array(sent.prefix(limit)), truncated: sent.count > limit) : nil
        if !request.isViewerRequest {
            proxy.record(request.record(id: proxy.makeFlowID(), response: head, bodySize: sent.count, events: events,
                                        responseBody: captured, error: error))
        }
    }

    /// The one step from "CONNECT accepted" to a tunnel: writes `200 Connection Established`, and once it is on the
    /// wire hands the connection over (`becomeTunnel`). `done` gets success once the request decoder handed what it
    /// held to the tunnel, or failure with the error (nil when the client is gone).
    func becomeTunnelAfter200(install: @escaping (ChannelPipeline.SynchronousOperations) throws -> Void,
                              done: @escaping (Result<Void, TunnelFailure>) -> Void) {
        let head = HTTPResponseHead(version: .http1_1, status: .init(statusCode: 200, reasonPhrase: "Connection Established"))
        send(.head(head))
        sendEnd().assumeIsolated().whenComplete { [self] written in
            guard case .success = written else { return done(.failure(TunnelFailure(nil))) }
            do {
                try becomeTunnel(install: install).assumeIsolated().whenComplete { handedOver in
                    done(handedOver.mapError { _ in TunnelFailure(nil) })
                }
            } catch {
                done(.failure(TunnelFailure(error)))
            }
        }
    }

    /// The server accepted an upgrade: writes its `101` head, and once it is on the wire hands the connection to
    /// what `install` adds (the HTTP handlers and the idle timeout go: an open session may be silent for long).
    /// `done` gets whether the hand-over happened.
    func becomeUpgraded(head: HTTPResponseHead, install: @escaping (ChannelPipeline.SynchronousOperations) throws -> Void,
                        done: @escaping (Bool) -> Void) {
        guard case .upgrading = state else { return done(false) }
        state = .tunnelling
        send(.head(head))
        sendEnd().assumeIsolated().whenComplete { [self] written in
            guard case .success = written else { return done(false) }
            do {
                try becomeTunnel { pipeline in
                    if let idle = try? pipeline.handler(type: IdleWatch.self) { pipeline.removeHandler(idle, promise: nil) }
                    try install(pipeline)
                }
                done(true)
            } catch {
                proxy.logger.error("upgrade: cannot hand the connection over: \(error)")
                self.context?.close(promise: nil)
                done(false)
            }
        }
    }

    /// The server did not accept the upgrade (its answer, or hookproxy's error, was written): the response ends and
    /// the connection closes (the client's decoder stopped after the upgrade request).
    func upgradeRefused() {
        guard case .upgrading = state else { return }
        state = .closing
        guard let context = self.context else { return }
        sendEnd().assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    /// Hands the connection to a tunnel, after the 200 went out: removes the HTTP handlers (this one included),
    /// lets `install` add what serves the tunnel, and removes the request decoder last, so bytes the client sent
    /// right after its CONNECT (before it read the 200) flow into what `install` added instead of being dropped.
    /// The future completes once the decoder is gone and what it held went to the tunnel.
    @discardableResult
    func becomeTunnel(install: (ChannelPipeline.SynchronousOperations) throws -> Void) throws -> EventLoopFuture<Void> {
        guard let context else { throw ChannelError.ioOnClosedChannel }
        let pipeline = context.pipeline.syncOperations
        let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        var others: [any RemovableChannelHandler] = [try pipeline.handler(type: ProtocolErrorHandler.self),
                                                     try pipeline.handler(type: PipeliningGate.self),
                                                     try pipeline.handler(type: HTTPResponseEncoder.self)]
        if let validator = try? pipeline.handler(type: NIOHTTPResponseHeadersValidator.self) { others.append(validator) }
        if let upgrader = try? pipeline.handler(type: HTTPServerUpgradeHandler.self) { others.append(upgrader) }
        for handler in others { pipeline.removeHandler(handler, promise: nil) }
        pipeline.removeHandler(self, promise: nil)
        try install(pipeline)
        // The decoder hands over its leftovers as a read with no read-complete after it, and what `install` added
        // may act only at read-complete (the glue flushes then): complete the read once the decoder is gone.
        let channel = context.channel
        let removed = channel.eventLoop.makePromise(of: Void.self)
        pipeline.removeHandler(decoder, promise: removed)
        removed.futureResult.whenSuccess { channel.pipeline.fireChannelReadComplete() }
        return removed.futureResult
    }

    /// Makes the viewer's answer on `ViewerGate.queue`, then writes it on the loop (unless the client left).
    private func answerViewer(_ make: @escaping @Sendable () -> LocalResponse, keepAlive: Bool, request: RequestContext) {
        state = .awaitingViewer
        let loop = eventLoop!
        let handler = NIOLoopBound(self, eventLoop: loop)
        ViewerGate.queue.async {
            let response = make()
            loop.execute {
                let handler = handler.value
                guard case .awaitingViewer = handler.state, handler.context != nil else { return }
                handler.writeLocal(response, keepAlive: keepAlive, events: [], request: request)
            }
        }
    }

    /// An HTTP/1.0 client gets the stream unframed, its end the close (it cannot read chunked).
    private func startEventStream(version: HTTPVersion) {
        guard let viewer = proxy.viewer else { return }
        let stream = EventStream(handler: self, viewer: viewer, eventLoop: eventLoop)
        state = .streamingEvents(stream)
        if !stream.start(version: version) {
            state = .idle
            let refusal = LocalResponse.text(503, "hookproxy: shutting down\n", headers: ViewerAnswer.commonHeaders)
            var request = RequestContext(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/api/events"),
                                         client: "", start: Date())
            request.isViewerRequest = true
            writeLocal(refusal, keepAlive: false, events: [], request: request)
        }
    }

    /// Starts writing a download (`DownloadStream`). Its length is not known ahead: chunked for HTTP/1.1, and an
    /// HTTP/1.0 client learns where it ends from the close.
    private func startDownload(_ head: ResponseHead, _ download: FlowDownload, keepAlive: Bool, request: RequestContext) {
        let version = request.head.version
        let keepAlive = keepAlive && !(version.major == 1 && version.minor == 0)
        let stream = DownloadStream(handler: self, eventLoop: eventLoop)
        state = .downloading(stream, keepAlive: keepAlive)
        var head = head
        if !keepAlive { head.headers.set("Connection", "close") }
        stream.start(head: head.nioHead(version: version), download: download)
    }

    /// The download's last part is written: its response ends, and the connection serves the next request (or
    /// closes).
    func downloadFinished() {
        guard case .downloading(_, let keepAlive) = state else { return }
        state = keepAlive ? .idle : .closing
        guard let context = self.context else { return }
        sendEnd().assumeIsolated().whenComplete { [self] _ in
            if !keepAlive { context.close(promise: nil) } else if case .idle = state { awaitHead() }
        }
    }

    /// The event stream ended (shutdown): its response ends and the connection closes.
    func eventStreamFinished() {
        guard case .streamingEvents = state else { return }
        state = .closing
        guard let context = self.context else { return }
        sendEnd().assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    private func illegalTransition(_ what: String) {
        proxy.logger.error("internal: \(what); closing the connection")
        context?.close(promise: nil)
    }
}

extension ProxyRequestHandler {
    /// True once the connection is gone too: writes then go nowhere, and nothing should wait for them.
    var isWritable: Bool { context?.channel.isWritable ?? true }


    /// Closes the connection once everything written so far is on the wire (a plain `close` would drop queued
    /// writes: the head and body bytes of a response whose upstream died mid-body). No clean end is written, so
    /// the client can tell the body is incomplete.
    func closeConnection() {
        guard let context = self.context else { return }
        guard let encoder = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else {
            // An HTTP/2 stream: an empty DATA write completes after every frame queued before it; closing then
            // resets the stream.
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer())))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
            return
        }
        // A zero-length write below the HTTP encoder completes after every write queued before it.
        encoder.writeAndFlush(NIOAny(context.channel.allocator.buffer(capacity: 0))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// The body of a response to CONNECT that refuses it (400, 407, 502). NIO's response encoder frames every
    /// response to CONNECT without a body (right for the 2xx that starts a tunnel) and drops body writes, so the
    /// bytes go out below the encoder, after the head; the caller closes the connection, which ends the body
    /// (RFC 9112 §6.3: no Content-Length, no Transfer-Encoding → the body runs to the close).
    func sendBodyBelowEncoder(_ bytes: [UInt8]) {
        guard let context, let encoder = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else { return }
        encoder.write(NIOAny(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

}

/// Why a CONNECT did not become a tunnel: the error from setting it up, or nil when the 200 could not be written.
struct TunnelFailure: Error {
    let error: (any Error)?
    init(_ error: (any Error)?) { self.error = error }
}
