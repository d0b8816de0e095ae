import FoundationEssentials
import Glibc
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOSSL
import ProxyModel
import ProxyRules
import ProxyUpstream

/// A request that asks for a protocol upgrade (`Upgrade: websocket`, or another token): the handshake, carried
/// upstream on a connection curl makes (`UpstreamEngine.connect`: DNS, `--upstream-proxy`, TLS judged by `trust`)
/// and then speaks itself, and what follows it.
///
/// The request head goes out through NIO's HTTP/1 request encoder and the server's answer comes back through its
/// response decoder, both hosted in an `EmbeddedChannel` (no socket: bytes in, parts out). A `101` hands the client
/// connection and the upstream connection to a relay (`WebSocketSession`, or `RawUpgradeRelay` for other
/// protocols); any other answer goes to the client as the response, and the connection closes.
///
/// Threading: the client connection's event loop, for everything (the codec channel was made there).
final class UpgradeHandshake: UpstreamConnectionDelegate {
    enum State {
        case connecting
        /// The request is out; the server's head is awaited.
        case awaitingHead
        /// A non-101 answer: its body is streamed to the client.
        case relayingResponse
        /// 101: a relay owns both connections now.
        case upgraded
        case done
    }

    let proxy: ProxyContext
    let eventLoop: any EventLoop
    let plan: FlowPlan
    let request: RequestContext
    let upstreamHead: RequestHead
    /// `websocket`, or the other protocol's token, lower-cased: the first the client offered, then the one the
    /// server's 101 chose.
    private(set) var protocolName: String
    private weak var handler: ProxyRequestHandler?
    private var state = State.connecting
    private var transfer: UpstreamTransfer?
    private var connection: UpstreamConnection?
    private var outcome: UpstreamOutcome?
    private var codec: EmbeddedChannel?
    private var responseHead: ResponseHead?
    private var bodyBytes = 0
    private var responseCapture: CapturedBody?
    private var relay: (any UpgradeRelay)?
    /// The `Authorization` an answered challenge adds to the handshake (never logged).
    private var authorization: String?
    /// What `on_challenge` did with a 401 to the handshake.
    private var challengeEvents: [HookEvent] = []
    /// Every record of this exchange carries it: pending, open and ended, the viewer shows one flow.
    private lazy var flowID = proxy.makeFlowID()
    /// While the server's head is awaited: it must say something within the upstream idle timeout (`--idle-timeout`),
    /// as curl's low-speed limit asks of every other request.
    private var headDeadline: Scheduled<Void>?

    init(proxy: ProxyContext, handler: ProxyRequestHandler, eventLoop: any EventLoop, plan: FlowPlan,
         request: RequestContext, upstreamHead: RequestHead, protocolName: String) {
        self.proxy = proxy
        self.handler = handler
        self.eventLoop = eventLoop
        self.plan = plan
        self.request = request
        self.upstreamHead = upstreamHead
        self.protocolName = protocolName
        if proxy.configuration.captureBodies { responseCapture = CapturedBody() }
    }

    /// Whether a client's request asks for an upgrade hookproxy carries: a bodiless HTTP/1.1 request with `Upgrade`
    /// and the `upgrade` connection option (RFC 9110 §7.8: without it, `Upgrade` is a stray header, dropped).
    /// Returns the protocol token (lower-cased, the first one offered).
    static func upgradeToken(_ head: HTTPRequestHead, bodiless: Bool) -> String? {
        guard bodiless, head.version == .http1_1, let value = head.headers.first(name: "upgrade"),
              head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "upgrade" })
        else { return nil }
        let token = value.split(separator: ",").first.map { $0.trimmingSpaces().lowercased() } ?? ""
        return token.isEmpty ? nil : token
    }

    /// The head to send upstream: the client's (after rules) with its `Upgrade` and `Connection: Upgrade` back
    /// (the classifier drops them as hop-by-hop) and its `Sec-WebSocket-*` headers unchanged.
    static func restoringUpgrade(_ head: RequestHead, from client: HTTPRequestHead) -> RequestHead {
        var head = head
        if let upgrade = client.headers.first(name: "upgrade") {
            head.headers.remove("Upgrade")
            head.headers.add("Upgrade", upgrade)
            head.headers.remove("Connection")
            head.headers.add("Connection", "Upgrade")
        }
        return head
    }

    func start() {
        proxy.connections.exchangeStarted()
        // The viewer shows the handshake as pending, then the open session, then the ended one: one flow, one id.
        if proxy.viewer?.store.isWatched == true { proxy.started(record(response: nil, webSocket: nil, error: nil)) }
        connectUpstream()
    }

    /// A fresh handshake codec and upstream connection (again after an answered challenge).
    private func connectUpstream() {
        codec.map { _ = try? $0.finish() }
        let codec = EmbeddedChannel()
        do {
            try codec.pipeline.syncOperations.addHandler(HTTPRequestEncoder())
            try codec.pipeline.syncOperations.addHandler(
                ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes)))
        } catch {
            return fail(ProxyError(.internalError, "hookproxy: cannot set up the upgrade handshake: \(error)"))
        }
        self.codec = codec
        state = .connecting
        // The challenge policy goes along for its client certificate (curl presents it in the TLS handshake).
        let upstream = UpstreamRequest(head: upstreamHead, body: .none, settings: proxy.engine.settings,
                                       trust: plan.trust, challenge: plan.onChallenge)
        transfer = proxy.engine.connect(upstream, delegate: self, on: eventLoop)
    }

    /// The client went away before the relay took over.
    func clientClosed() {
        handler = nil
        switch state {
        case .connecting, .awaitingHead, .relayingResponse:
            transfer?.cancel()
            connection?.close()
            finish(error: "client closed the connection")
        case .upgraded, .done:
            break
        }
    }

    // MARK: - upstream

    func upstreamConnected(_ connection: UpstreamConnection, _ outcome: UpstreamOutcome) {
        self.outcome = outcome
        guard case .connecting = state, handler != nil, let codec else {
            connection.close()
            return
        }
        self.connection = connection
        state = .awaitingHead
        awaitServer()
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: upstreamHead.method),
                                   uri: upstreamHead.url.pathAndQuery, headers: upstreamHead.headers.nioHeaders)
        head.headers.remove(name: "content-length")
        if let authorization { head.headers.replaceOrAdd(name: "Authorization", value: authorization) }
        do {
            try codec.writeOutbound(HTTPClientRequestPart.head(head))
            try codec.writeOutbound(HTTPClientRequestPart.end(nil))
            while let bytes = try codec.readOutbound(as: ByteBuffer.self) { connection.write(bytes) }
        } catch {
            connection.close()
            fail(ProxyError(.internalError, "hookproxy: cannot write the upgrade request: \(error)"))
        }
    }

    func upstreamConnectFailed(_ outcome: UpstreamOutcome) {
        self.outcome = outcome
        fail(outcome.error ?? ProxyError(.upstreamFailed, "hookproxy: cannot connect to \(upstreamHead.url.authority)"))
    }

    func upstreamReceived(_ bytes: ByteBuffer) {
        switch state {
        case .awaitingHead, .relayingResponse:
            if case .awaitingHead = state { awaitServer() }
            parse(bytes)
        case .upgraded:
            relay?.upstreamReceived(bytes)
        case .connecting, .done:
            break
        }
    }

    func upstreamWritable() {
        if case .upgraded = state { relay?.upstreamWritable() }
    }

    func upstreamFinishedSending() {
        if case .upgraded = state { relay?.upstreamFinishedSending() }
    }

    func upstreamClosed(_ error: ProxyError?) {
        switch state {
        case .awaitingHead:
            connection = nil
            fail(error ?? ProxyError(.upstreamClosed, "hookproxy: upstream closed the connection \(upstreamHead.url.authority): before a complete response head"))
        case .relayingResponse:
            connection = nil
            // A close-delimited body ends here; the decoder says whether the body was complete.
            _ = try? codec?.finish()
            finishResponse(error: error?.message)
        case .upgraded:
            relay?.upstreamClosed(error)
        case .connecting, .done:
            break
        }
    }

    // MARK: - the server's answer

    /// (Re)starts the wait for the server's next bytes of its head.
    private func awaitServer() {
        headDeadline?.cancel()
        let timeout = proxy.engine.settings.idleTimeoutMs
        headDeadline = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(timeout))) { [weak self] in
            guard let self, case .awaitingHead = state else { return }
            connection?.close()
            connection = nil
            fail(ProxyError(.timeout, "hookproxy: timeout waiting for \(upstreamHead.url.authority): no answer to the upgrade request within \(timeout) ms (--idle-timeout)"))
        }
    }

    private func parse(_ bytes: ByteBuffer) {
        guard let codec else { return }
        do {
            try codec.writeInbound(bytes)
            while let part = try codec.readInbound(as: HTTPClientResponsePart.self) {
                switch part {
                case .head(let head):
                    guard receive(head) else { return }
                case .body(let buffer):
                    writeBody(buffer)
                case .end:
                    if responseHead?.status == 101 { return switchProtocols() }
                    finishResponse(error: nil)
                    return
                }
            }
        } catch {
            connection?.close()
            connection = nil
            if case .relayingResponse = state { return finishResponse(error: "bad response body: \(error)") }
            fail(ProxyError(.upstreamFailed, "hookproxy: bad response from \(upstreamHead.url.authority): \(error)"))
        }
    }

    /// Takes the server's head; false when it refused the answer (a 101 that names no protocol the client offered: the
    /// bytes after it cannot be relayed as that protocol) and answered 502 instead.
    private func receive(_ nio: HTTPResponseHead) -> Bool {
        if nio.status == .unauthorized || nio.status == .proxyAuthenticationRequired, meetChallenge(nio) { return false }
        if nio.status == .switchingProtocols {
            let offered = UpgradeHandshake.tokens(upstreamHead.headers.values(for: "upgrade"))
            let chosen = UpgradeHandshake.tokens(nio.headers[canonicalForm: "upgrade"].map(String.init))
            guard chosen.count == 1, offered.contains(chosen[0]) else {
                connection?.close()
                connection = nil
                let named = chosen.isEmpty ? "no Upgrade header" : "Upgrade: \(chosen.joined(separator: ", "))"
                fail(ProxyError(.upstreamFailed, "hookproxy: bad response from \(upstreamHead.url.authority): 101 Switching Protocols with \(named), to a request for \(offered.joined(separator: ", "))"))
                return false
            }
            protocolName = chosen[0]
        }
        var head = ResponseHead(status: Int(nio.status.code), reason: nio.status.reasonPhrase,
                                version: HTTPVersionNumber(nio.version), headers: HeaderFields(nio.headers))
        if head.status != 101 {
            HopByHop.strip(&head.headers, in: .response)
            head.headers.set("Connection", "close")
            state = .relayingResponse
        }
        plan.editResponse(&head)
        responseHead = head
        guard head.status != 101 else { return true }
        handler?.send(.head(head.nioHead(version: request.head.version)))
        return true
    }

    /// `on_challenge` on a 401/407 to the handshake: `cancel` answers 502; `use_credential` sends the handshake
    /// again, once, on a new connection, with the credential (`HandshakeChallenge`). True when it took the answer
    /// over; false hands the response to the client.
    private func meetChallenge(_ nio: HTTPResponseHead) -> Bool {
        let head = ResponseHead(status: Int(nio.status.code), reason: nio.status.reasonPhrase,
                                version: HTTPVersionNumber(nio.version), headers: HeaderFields(nio.headers))
        let context = HookDecisions.Context(request: upstreamHead, hopPlan: plan, redirectPolicy: nil, follower: nil,
                                            canReplayBody: true, bodyLimit: proxy.limits.bodyLimit)
        if case .answer(let error, let event)? = HookDecisions.onHead(head, context) {
            if let event { challengeEvents.append(event) }
            connection?.close()
            connection = nil
            fail(error)
            return true
        }
        switch HandshakeChallenge.decide(head, policy: plan.onChallenge, request: upstreamHead, answered: authorization != nil) {
        case .pass(let event):
            if let event { challengeEvents = [event] }
            return false
        case .answer(let value, let scheme):
            challengeEvents = [HookEvent(hook: .challenge, action: "challenge answered \(scheme)")]
            authorization = value
            headDeadline?.cancel()
            headDeadline = nil
            connection?.close()
            connection = nil
            connectUpstream()
            return true
        }
    }

    /// The protocol tokens of `Upgrade` values, lower-cased, in order.
    static func tokens(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces().lowercased() }.filter { !$0.isEmpty }
    }

    private func writeBody(_ buffer: ByteBuffer) {
        bodyBytes += buffer.readableBytes
        responseCapture?.append(buffer, limit: proxy.limits.captureLimit)
        handler?.send(.body(.byteBuffer(buffer)))
        handler?.flush()
        // A refusal can be long and the client slow: the server waits while the client's connection is full.
        if handler?.isWritable == false { connection?.setReading(false) }
    }

    /// The client's connection drained (it was full): the server's answer is read again.
    func clientWritable() {
        if case .relayingResponse = state { connection?.setReading(true) }
    }

    /// 101: the client gets the head, and the relay both connections (with whatever the server sent after it).
    private func switchProtocols() {
        guard let codec, let connection, let handler, let head = responseHead else { return }
        var leftover: [ByteBuffer] = []
        let decoder = try? codec.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self)
        if let decoder { codec.pipeline.syncOperations.removeHandler(decoder, promise: nil) }
        codec.embeddedEventLoop.run()  // the decoder leaves (handing over what followed the head) as a loop task
        while let bytes = try? codec.readInbound(as: ByteBuffer.self) { leftover.append(bytes) }
        _ = try? codec.finish()
        self.codec = nil
        headDeadline?.cancel()
        headDeadline = nil
        state = .upgraded
        // The HTTP exchange is over: shutdown does not wait for an open session (nor for a tunnel) to end.
        proxy.connections.exchangeEnded()
        let log = WebSocketLog(protocolName: protocolName, isOpening: true)
        proxy.record(record(response: head, webSocket: log, error: nil))
        let relay: any UpgradeRelay = protocolName == "websocket"
            ? WebSocketSession(handshake: self, upstream: connection)
            : RawUpgradeRelay(handshake: self, upstream: connection)
        self.relay = relay
        handler.becomeUpgraded(head: head.nioHead(version: request.head.version), install: { pipeline in
            try relay.install(on: pipeline)
        }, done: { installed in
            guard installed else {
                relay.clientClosed()
                return
            }
            for bytes in leftover { relay.upstreamReceived(bytes) }
        })
    }

    // MARK: - the end

    /// hookproxy's own answer (502, 504…) when no response came.
    private func fail(_ error: ProxyError) {
        guard let handler else { return finish(error: error.message) }
        let local = LocalResponse.error(error)
        var head = local.head
        head.headers.set("Connection", "close")
        responseHead = head
        handler.send(.head(head.nioHead(version: request.head.version)))
        handler.send(.body(.byteBuffer(ByteBuffer(bytes: local.body))))
        bodyBytes = local.body.count
        handler.upgradeRefused()
        finish(error: error.message)
    }

    private func finishResponse(error: String?) {
        connection?.close()
        connection = nil
        handler?.upgradeRefused()
        finish(error: error)
    }

    private func finish(error: String?) {
        if case .done = state { return }
        state = .done
        headDeadline?.cancel()
        headDeadline = nil
        codec.map { _ = try? $0.finish() }
        codec = nil
        proxy.connections.exchangeEnded()
        proxy.record(record(response: responseHead, webSocket: nil, error: error))
    }

    /// The session ended (the relay says how): the log gets the handshake's record with the session in it.
    func sessionEnded(_ log: WebSocketLog, notes: [String] = []) {
        guard case .upgraded = state else { return }
        state = .done
        connection = nil
        relay = nil
        let events = notes.map { HookEvent(hook: .body, action: $0) }
        proxy.record(record(response: responseHead, webSocket: log, error: nil, events: events))
    }

    /// Header values rules set from the environment, and the credential an answered challenge sent: never logged.
    private var secretValues: [String] {
        let password = plan.onChallenge?.password.flatMap { $0.isEmpty ? nil : $0 }
        return plan.secretValues + [password, authorization].compactMap { $0 }
    }

    /// The server's 101 (or other answer) headers, once they arrived.
    var responseHeaders: HeaderFields? { responseHead?.headers }

    /// `--idle-timeout`: how long a relay whose client left waits for a server that takes no byte of what is still
    /// to send (`UpstreamConnection.closeWhenSent`).
    var upstreamIdleTimeout: TimeAmount { .milliseconds(Int64(proxy.engine.settings.idleTimeoutMs)) }
    /// `--idle-timeout` on the client's side: how long a relay whose server finished waits for the client to read.
    var clientIdleTimeout: TimeAmount { .milliseconds(Int64(proxy.limits.clientIdleTimeoutMs)) }
    /// Why a relay let its client go (`ClientDrainWatch`): the session's end reason in the logs. `serverFinished`:
    /// the server had closed (or the session had ended); else the session was open, the server held back by a
    /// client that took none of what waited for it.
    func clientStalledReason(serverFinished: Bool) -> String {
        let took = "the client took nothing for \(Double(proxy.limits.clientIdleTimeoutMs) / 1000) s (--idle-timeout)"
        return serverFinished ? "server closed the connection; \(took)" : "\(took) of what the server sent"
    }

    func record(response: ResponseHead?, webSocket: WebSocketLog?, error: String?, events: [HookEvent] = []) -> FlowRecord {
        var flow = request.record(
            id: flowID, response: response, bodySize: bodyBytes, events: plan.events + challengeEvents + events,
            responseBody: webSocket == nil ? responseCapture : nil,
            hop: RequestContext.Hop(number: 0, start: request.start, upstreamRequest: upstreamHead,
                                    url: request.clientHead?.url.description ?? upstreamHead.url.description,
                                    requestBodySize: 0, requestBody: nil, outcome: outcome, rules: plan.firedRules,
                                    error: error, secretValues: secretValues))
        flow.webSocket = webSocket
        return flow
    }
}

@available(*, unavailable)
extension UpgradeHandshake: Sendable {}

/// What carries an upgraded connection after the 101: installs its handlers on the client's pipeline (the HTTP
/// handlers are gone), and hears the upstream connection's bytes through the handshake. Client connection's loop.
protocol UpgradeRelay: AnyObject {
    func install(on pipeline: ChannelPipeline.SynchronousOperations) throws
    func upstreamReceived(_ bytes: ByteBuffer)
    func upstreamWritable()
    func upstreamClosed(_ error: ProxyError?)
    /// The server finished while reading it was held (the client is behind): `upstreamClosed` follows later.
    func upstreamFinishedSending()
    /// The client connection could not be handed over (it closed meanwhile).
    func clientClosed()
}

extension UpgradeRelay {
    /// Whether an error on the client's connection only says that the client left: a reset, or TLS closed without
    /// close_notify (as many clients close). The relay then ends as for a close, and what the client sent still goes
    /// to the server; other errors (a bad frame, a TLS failure) end it without that.
    static func clientLeft(_ error: any Error) -> Bool {
        if case .uncleanShutdown? = error as? NIOSSLError { return true }
        return error is IOError
    }
}
