import FoundationEssentials
import Glibc
import NIOCore
import NIOWebSocket
import ProxyModel
import ProxyRules
import ProxyUpstream

/// A WebSocket session after its 101: frames from the client (parsed by NIO's WebSocket decoder in the client's
/// pipeline) go to the server, frames from the server (parsed by the same decoder, in `ServerFrameCodec`, fed with
/// the upstream connection's bytes) go to the client. Each frame is forwarded as it arrives, as it came
/// (fragmentation, RSV bits, the client's masking key), unless a `websocket` rule edits that direction's text
/// messages; a data frame over a MiB goes on in fragments of a MiB, cut as its bytes come (`FrameSplitter`, in
/// front of each decoder), so that no direction holds a big frame whole. Ping, pong and close frames pass both ways;
/// a side that vanishes closes the other. What was already
/// taken from the side that left still goes to the other before that connection closes: toward the client through
/// NIO's pending writes, toward the server (the client's close frame too) through `UpstreamConnection.closeWhenSent`,
/// both bounded by `--idle-timeout`: a client that takes none of what is queued for it for that long is let go
/// (`ClientDrainWatch`; after the end, `LingeringClose`), and an open session's server then gets a close frame
/// (1001). A session that ends on an error (a bad frame, a message it cannot compress, the server gone) closes the
/// server's connection at once.
///
/// Backpressure: reading the client waits while the upstream connection holds more than `highWater` bytes; reading
/// the server waits while the client's channel is not writable.
///
/// Threading: the client connection's event loop. It is the last handler of the client's pipeline.
final class WebSocketSession: ChannelDuplexHandler, UpgradeRelay {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    static let maxFrameSize = 64 * 1024 * 1024
    static let highWater = 1024 * 1024
    /// Messages a session lists in its log (each with its data up to the capture limit); later ones are counted only.
    static let maxListedMessages = 10_000

    private let handshake: UpgradeHandshake
    private let upstream: UpstreamConnection
    private var upstreamCodec: ServerFrameCodec?
    private var context: ChannelHandlerContext?
    private var log: WebSocketLog
    private var capturedBytes = 0
    private let captureLimit: Int
    private var toServer: MessageFlow
    private var toClient: MessageFlow
    private var reads = ReadGate()
    private var ended = false
    /// The server closed its side (the rest of what it sent may still be on its way to the client).
    private var serverFinished = false
    /// A close frame went to that end (relayed from the other): hookproxy's own at shutdown would be a second one.
    private var closeSentToServer = false
    private var closeSentToClient = false
    private let drain: ClientDrainWatch
    /// What cuts each direction's big frames into fragments; nil when an extension hookproxy does not know was agreed.
    private let splitter: FrameSplitter?
    /// What each frame is checked against before it goes on (masking, RSV bits).
    private let rules: FrameRules
    /// Frames a side sent after its close frame, dropped (RFC 6455 §5.5.1: nothing follows a close frame). Bytes
    /// that are no frame count as one, once: the decoder then drops all it gets.
    private var droppedAfterClose = (fromClient: DroppedAfterClose(), fromServer: DroppedAfterClose())
    /// Why hookproxy failed a session whose log already holds the close frame that passed before: a hook event.
    private var failureAfterClose: String?
    /// Bounds the wait for an end to answer the other's close frame.
    private let closeAnswer = CloseAnswerWatch()
    /// Why the session ended before an end answered a close frame: a hook event.
    private var closeUnanswered: String?

    init(handshake: UpgradeHandshake, upstream: UpstreamConnection) {
        self.handshake = handshake
        self.upstream = upstream
        self.log = WebSocketLog(protocolName: "websocket")
        self.drain = ClientDrainWatch(timeout: handshake.clientIdleTimeout)
        self.captureLimit = handshake.proxy.configuration.captureBodies ? handshake.proxy.limits.captureLimit : 0
        let extensions = handshake.responseHeaders?.values(for: "sec-websocket-extensions") ?? []
        let deflate = DeflateAgreement(serverAnswer: extensions)
        splitter = FrameSplitter.allowed(extensions: extensions)
            ? FrameSplitter(maxFrameSize: WebSocketSession.maxFrameSize, knowsRSV1: deflate != nil) : nil
        rules = FrameRules(serverAnswer: extensions)
        toServer = MessageFlow(direction: .send, transform: handshake.plan.webSocketToServer,
                               inflater: deflate.map { MessageInflater(windowBits: $0.clientWindowBits, noContextTakeover: $0.clientNoContextTakeover) },
                               deflater: deflate.flatMap { MessageDeflater(windowBits: $0.clientWindowBits, noContextTakeover: $0.clientNoContextTakeover) })
        toClient = MessageFlow(direction: .receive, transform: handshake.plan.webSocketToClient,
                               inflater: deflate.map { MessageInflater(windowBits: $0.serverWindowBits, noContextTakeover: $0.serverNoContextTakeover) },
                               deflater: deflate.flatMap { MessageDeflater(windowBits: $0.serverWindowBits, noContextTakeover: $0.serverNoContextTakeover) })
    }

    // MARK: - setting up (after the 101 went out)

    func install(on pipeline: ChannelPipeline.SynchronousOperations) throws {
        upstreamCodec = try ServerFrameCodec(splitter: splitter, maxFrameSize: WebSocketSession.maxFrameSize)
        if let splitter { try pipeline.addHandler(FrameSplittingHandler(splitter)) }
        try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketSession.maxFrameSize)))
        try pipeline.addHandler(WebSocketFrameEncoder())
        try pipeline.addHandler(self)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The HTTP handler held reading when the upgrade request ended: reading starts again here.
        context.read()
    }

    /// The context holds this handler: keeping it would keep both (and the channel) alive after the close.
    func handlerRemoved(context: ChannelHandlerContext) {
        drain.cancel()
        closeAnswer.cancel()
        self.context = nil
    }

    // MARK: - client side

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ended else { return }  // (what the decoder still had when the session ended)
        switch process(unwrapInboundIn(data), flow: &toServer) {
        case .forward(let frames): for out in frames { sendUpstream(out) }
        case .fail(let close): fail(close)
        }
        if closeSentToServer { closeFramePassed() }
        if upstream.bufferedBytes > WebSocketSession.highWater { reads.pause() }
    }

    /// Every read of the client's bytes ends here, whole frames in it or not (a big frame, a close frame trickled):
    /// what the client sends counts as its answer being under way.
    func channelReadComplete(context: ChannelHandlerContext) {
        closeAnswer.noteHeard(from: .client)
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        reads.read(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { upstream.setReading(true) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(WebSocketLog.Close(code: nil, reason: "client closed the connection", by: .client), sendingRest: true)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if Self.clientLeft(error) {
            return end(WebSocketLog.Close(code: nil, reason: "client connection failed: \(error)", by: .client), sendingRest: true)
        }
        // A frame NIO cannot parse (too large, bad opcode): the session cannot go on, unless the client already sent
        // its close frame: what follows it is dropped, whatever it is, and the server's answer still comes.
        handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): client frame error: \(error)")
        if closeSentToServer, error is NIOWebSocketError || error is ByteToMessageDecoderError {
            droppedAfterClose.fromClient.undecodableBytes()
            return
        }
        fail(WebSocketLog.Close(code: 1002, reason: "hookproxy: bad frame from the client: \(FrameErrorText.describe(error, maxFrameSize: WebSocketSession.maxFrameSize))", by: .client))
    }

    /// hookproxy is shutting down (`ProxyServer.shutdown` tells every connection): both ends get the close frame a
    /// server going down sends (1001 Going Away), and the log says hookproxy ended the session, not the client;
    /// unless a close frame already passed: that end gets no second one, and the log keeps the close that passed.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        guard !ended else { return }
        let close = WebSocketLog.Close(code: 1001, reason: "hookproxy: shutting down", by: .server)
        // RFC 6455 §5.5.1: an end sends one close frame. One already relayed stays the close the log records.
        if log.close == nil { log.close = close }
        sendCloseFrames(code: 1001, reason: close.reason)
        end(close, sendingRest: true)
    }

    func clientClosed() {
        end(WebSocketLog.Close(code: nil, reason: "client closed the connection", by: .client), sendingRest: true)
    }

    // MARK: - server side

    func upstreamReceived(_ bytes: ByteBuffer) {
        guard let codec = upstreamCodec, let context else { return }
        drain.noteDelivered()
        closeAnswer.noteHeard(from: .server)
        // The frames decoded before a bad one still reach the client (the close waits for them); none after a frame
        // that ended the session.
        let frameError = codec.decode(bytes) { frame in
            guard !ended else { return }
            switch process(frame, flow: &toClient) {
            case .forward(let frames): for out in frames { context.write(wrapOutboundOut(out), promise: nil) }
            case .fail(let close): fail(close)
            }
        }
        if let frameError, !ended {
            handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): server frame error: \(frameError)")
            // After the server's close frame, what follows is dropped, whatever it is.
            if closeSentToClient {
                droppedAfterClose.fromServer.undecodableBytes()
            } else {
                fail(WebSocketLog.Close(code: 1002, reason: "hookproxy: bad frame from the server: \(FrameErrorText.describe(frameError, maxFrameSize: WebSocketSession.maxFrameSize))", by: .server))
            }
        }
        guard !ended else { return }
        context.flush()
        if closeSentToClient { closeFramePassed() }
        // A failed write can end the session inside the flush (the client reset the connection).
        if !ended, !context.channel.isWritable {
            upstream.setReading(false)
            // An open session has no idle timeout, but a client that takes none of what waits for it does not
            // hold the session (and the server, held back) for good.
            watchClientDrain()
        }
    }

    func upstreamWritable() {
        reads.resume(context)
    }

    func upstreamClosed(_ error: ProxyError?) {
        end(WebSocketLog.Close(code: nil, reason: error?.message ?? "server closed the connection", by: .server))
    }

    func upstreamFinishedSending() {
        serverFinished = true
        watchClientDrain()
    }

    /// A client that takes nothing for `--idle-timeout` of what waits for it is let go, and the session ends. An
    /// open session's server is told so with a close frame (1001) and still gets what the client sent before.
    private func watchClientDrain() {
        guard let context else { return }
        drain.start(context) { [self] in
            let finished = serverFinished || ended
            let reason = handshake.clientStalledReason(serverFinished: finished)
            if !finished { sendCloseFrames(code: 1001, reason: "hookproxy: \(reason)", toClient: false) }
            end(WebSocketLog.Close(code: nil, reason: reason, by: finished ? .server : .client), sendingRest: true)
            if let channel = self.context?.channel { ImmediateClose.close(channel) }
        }
    }

    private func sendUpstream(_ frame: WebSocketFrame) {
        guard let codec = upstreamCodec else { return }
        do {
            // The encoder is given the frame with its payload already masked (`MaskedFrame`: 8 bytes at a time; the
            // encoder's own masking goes byte by byte), and the key goes into the header it wrote.
            let key = frame.maskKey
            let premasked = key.flatMap { MaskedFrame.premasked(frame, key: $0) }
            // The encoder gives the header and the payload apart: one send for both.
            var keyForHeader = premasked == nil ? nil : key  // the first buffer starts with the header
            try codec.encode(premasked ?? frame) { bytes in
                upstream.write(keyForHeader.map { MaskedFrame.addingKey($0, to: bytes) } ?? bytes, flush: false)
                keyForHeader = nil
            }
            upstream.flush()
        } catch {
            end(WebSocketLog.Close(code: 1011, reason: "hookproxy: cannot write to the server: \(error)", by: .client))
        }
    }

    // MARK: - frames

    /// What one frame leads to: frames to forward (none while a message an edit waits for is incomplete, or after
    /// the sender's close frame), or the session failing. The caller fails it, once `flow`'s access is over: `end`
    /// reads both flows.
    private enum Step {
        case forward(FrameBatch)
        case fail(WebSocketLog.Close)
    }

    /// What `frame` leads to, with the log updated.
    private func process(_ frame: WebSocketFrame, flow: inout MessageFlow) -> Step {
        let towardServer = flow.direction == .send
        let by: WebSocketLog.Close.Side = towardServer ? .client : .server
        // A close frame went on to the receiver: nothing after it may follow (RFC 6455 §5.5.1).
        if towardServer ? closeSentToServer : closeSentToClient {
            if towardServer { droppedAfterClose.fromClient.frame() } else { droppedAfterClose.fromServer.frame() }
            return .forward(.none)
        }
        if let what = rules.violation(frame, fromClient: towardServer) {
            handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): bad frame from the \(by): \(what)")
            return .fail(WebSocketLog.Close(code: 1002, reason: "hookproxy: bad frame from the \(by): \(what)", by: by))
        }
        let key = frame.maskKey
        let plain = frame.unmaskedFrame  // unmasked once, for the log, the rules and the encoder
        switch plain.opcode {
        case .connectionClose:
            if let (code, what) = CloseFrame.violation(plain.data) {
                handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): bad frame from the \(by): \(what)")
                return .fail(WebSocketLog.Close(code: Int(code), reason: "hookproxy: bad frame from the \(by): \(what)", by: by))
            }
            if log.close == nil {
                var data = plain.data
                let code = data.readInteger(as: UInt16.self).map(Int.init)
                let reason = data.readString(length: data.readableBytes) ?? ""
                log.close = WebSocketLog.Close(code: code, reason: reason, by: towardServer ? .client : .server)
            }
            if towardServer { closeSentToServer = true } else { closeSentToClient = true }
            return .forward(.one(WebSocketSession.forwardable(plain, towardServer: towardServer, key: key)))
        case .ping, .pong:
            return .forward(.one(WebSocketSession.forwardable(plain, towardServer: towardServer, key: key)))
        default:
            let result = flow.take(plain, room: logRoom)
            if let message = result.message { logMessage(message) }
            switch result.failure {
            case .badFrame(let what)?:
                handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): bad frame from the \(by): \(what)")
                return .fail(WebSocketLog.Close(code: 1002, reason: "hookproxy: bad frame from the \(by): \(what)", by: by))
            case .cannotEdit(let reason)?:
                // The receiver's window is hookproxy's now: a message it cannot compress again ends the session.
                return .fail(WebSocketLog.Close(code: 1009, reason: reason, by: by))
            case nil:
                break
            }
            return .forward(result.forward.mapFrames { WebSocketSession.forwardable($0, towardServer: towardServer, key: key) })
        }
    }

    /// How many bytes of a message starting now the log may keep: what the capture limit leaves of the session's,
    /// none once its list is full.
    private var logRoom: Int {
        log.messages.count < WebSocketSession.maxListedMessages ? max(0, captureLimit - capturedBytes) : 0
    }

    private func logMessage(_ message: MessageFlow.Complete) {
        switch message.direction {
        case .send:
            log.sentMessages += 1
            log.sentBytes += message.size
        case .receive:
            log.receivedMessages += 1
            log.receivedBytes += message.size
        }
        // Message data counts against the capture limit per session; counts and sizes are always complete. The
        // list itself stops at `maxListedMessages`, so a session's memory stays bounded however long it runs.
        guard log.messages.count < WebSocketSession.maxListedMessages else { return }
        let room = max(0, captureLimit - capturedBytes)
        let kept = Array(message.data.readableBytesView.prefix(room))
        capturedBytes += kept.count
        log.messages.append(WebSocketLog.Message(direction: message.direction, time: message.time, opcode: message.opcode,
                                                 size: message.size, data: kept,
                                                 truncated: message.truncated || kept.count < message.data.readableBytes))
    }

    /// An unmasked frame as it goes on: toward the server masked (with the client's `key` when it had one, so the
    /// bytes are the client's), toward the client unmasked. `sendUpstream` masks a frame that has a key.
    static func forwardable(_ frame: WebSocketFrame, towardServer: Bool, key: WebSocketMaskingKey?) -> WebSocketFrame {
        guard towardServer else { return frame }
        var masked = frame
        masked.maskKey = key ?? .random()
        return masked
    }

    // MARK: - the close handshake

    /// How long a server that got and sent its close frame has to close its connection (Chromium waits 2 s), at
    /// most `--idle-timeout`.
    static let serverCloseWait = TimeAmount.seconds(2)

    /// A close frame went on (called again after each later frame): with one end's through, the other end's answer
    /// is awaited; with both, the server's TCP close, and the session ends at it (`upstreamClosed`) or when it does
    /// not come in time (`CloseAnswerWatch`).
    private func closeFramePassed() {
        guard !ended, let context else { return }
        let awaited: CloseAnswerWatch.Awaited = closeSentToServer && closeSentToClient ? .serverClose
            : closeSentToServer ? .server : .client
        guard closeAnswer.awaited != awaited else { return }  // (called after every frame once a close passed)
        let timeout = switch awaited {
        case .server: handshake.upstreamIdleTimeout
        case .client: handshake.clientIdleTimeout
        case .serverClose: min(WebSocketSession.serverCloseWait, handshake.upstreamIdleTimeout)
        }
        let channel = context.channel
        let upstream = upstream
        let taken: () -> UInt64 = awaited == .client ? { channel.acknowledgedBytes } : { upstream.acknowledgedBytes }
        closeAnswer.start(awaiting: awaited, timeout: timeout, on: context.eventLoop, taken: taken) { [self] in
            endUnanswered(awaited, timeout: timeout)
        }
    }

    /// What `closeFramePassed` awaited did not come within `timeout`: the session ends, with a note. What is still
    /// queued for either end goes out first (`closeWhenSent`, `LingeringClose`: a FIN after the rest, as from a
    /// server closing first), but a silent client's connection closes at once.
    private func endUnanswered(_ awaited: CloseAnswerWatch.Awaited, timeout: TimeAmount) {
        guard !ended else { return }
        let seconds = "\(Double(timeout.nanoseconds / 1_000_000) / 1000) s"
        let reason = switch awaited {
        case .server: "the server did not answer the client's close frame: it sent and took nothing for \(seconds) (--idle-timeout)"
        case .client: "the client did not answer the server's close frame: it sent and took nothing for \(seconds) (--idle-timeout)"
        case .serverClose: "the server kept its connection open \(seconds) after the close handshake: hookproxy closed it"
        }
        closeUnanswered = reason
        handshake.proxy.logger.debug("websocket \(handshake.upstreamHead.url.authority): \(reason)")
        switch awaited {
        case .server, .serverClose:
            end(WebSocketLog.Close(code: nil, reason: reason, by: .server), sendingRest: true)
        case .client:
            end(WebSocketLog.Close(code: nil, reason: reason, by: .client), sendingRest: true)
            if let channel = context?.channel { ImmediateClose.close(channel) }
        }
    }

    // MARK: - the end

    /// Fails the session (RFC 6455 §7.1.7) on a fault hookproxy found: a bad frame, or a message it cannot edit.
    /// Each end that has had no close frame gets one with `close`'s code and reason, after what was already queued
    /// for it, so both peers learn why; then both connections close.
    private func fail(_ close: WebSocketLog.Close) {
        guard !ended else { return }
        if log.close != nil {
            // The log keeps the close frame that passed; the failure after it is not lost.
            failureAfterClose = "hookproxy failed the session after that close frame: \(close.code.map { "\($0) " } ?? "")\(close.reason)"
        }
        sendCloseFrames(code: UInt16(close.code ?? 1002), reason: close.reason)
        end(close, sendingRest: true)
    }

    /// A close frame to each end that has had none (not the client, when `toClient` is false).
    private func sendCloseFrames(code: UInt16, reason: String, toClient: Bool = true) {
        guard let context else { return }
        let frame = CloseFrame.make(code: code, reason: reason, allocator: context.channel.allocator)
        if !closeSentToServer {
            closeSentToServer = true
            sendUpstream(WebSocketSession.forwardable(frame, towardServer: true, key: nil))
        }
        if toClient, !closeSentToClient {
            closeSentToClient = true
            context.write(wrapOutboundOut(frame), promise: nil)
        }
    }

    /// Ends the session once: both connections close, the log gets its record. What was written toward the client
    /// still goes out; toward the server, with `sendingRest` (the client left), and else is dropped (an error, or
    /// the server left).
    private func end(_ close: WebSocketLog.Close, sendingRest: Bool = false) {
        guard !ended else { return }
        ended = true
        closeAnswer.cancel()
        if log.close == nil { log.close = close }
        if sendingRest {
            upstream.closeWhenSent(idleTimeout: handshake.upstreamIdleTimeout)
        } else {
            upstream.close()
        }
        upstreamCodec?.finish()
        upstreamCodec = nil
        if let context, context.channel.isActive {
            // What was written toward the client still reaches it, and what it still sends cannot reset the
            // connection under those bytes: a FIN after them, then the client's own close (or the idle timeout).
            context.flush()
            reads.resume(context)
            LingeringClose.start(context, proxy: handshake.proxy)
        }
        // A message cut short (a big frame relayed in fragments, or a client's own): what went on of it is logged.
        if let message = toServer.unfinished() { logMessage(message) }
        if let message = toClient.unfinished() { logMessage(message) }
        let unlisted = log.sentMessages + log.receivedMessages - log.messages.count
        var notes = toServer.notes.lines + toClient.notes.lines
        if unlisted > 0 {
            notes.append("\(unlisted) messages after the first \(WebSocketSession.maxListedMessages) not listed (counted in the totals)")
        }
        if let failureAfterClose { notes.append(failureAfterClose) }
        if let closeUnanswered { notes.append(closeUnanswered) }
        for (count, side) in [(droppedAfterClose.fromClient.frames, "client"), (droppedAfterClose.fromServer.frames, "server")] where count > 0 {
            notes.append("hookproxy dropped \(count) frame\(count == 1 ? "" : "s") the \(side) sent after its close frame (RFC 6455 §5.5.1: nothing follows a close frame)")
        }
        handshake.sessionEnded(log, notes: notes)
    }
}

@available(*, unavailable)
extension WebSocketSession: Sendable {}

/// What one side sent after its own close frame, dropped (RFC 6455 §5.5.1), counted for the log's note.
struct DroppedAfterClose {
    private(set) var frames = 0
    private var undecodable = false

    mutating func frame() { frames += 1 }

    /// Bytes that are no frame: counted once, as one frame (nothing after them can be split into frames).
    mutating func undecodableBytes() {
        guard !undecodable else { return }
        undecodable = true
        frames += 1
    }
}
