import NIOCore
import NIOHTTP1

/// Hands the request handler one request at a time: parts of a pipelined request wait here until the response
/// before it has ended, and are delivered then, in order (parser errors too).
///
/// It does what NIO's `HTTPServerPipelineHandler` does, with one difference: reading goes on while a response is
/// due, and stops only once something is waiting here, or a read brought bytes the decoder made nothing of (the
/// start of a pipelined head, or blank lines it drops), or after a CONNECT or an `Upgrade` request, whose bytes
/// would pile up in the stopped decoder. NIO's handler stops reading after every request and starts again after its
/// response, which costs two `epoll_ctl` calls a request, for clients that rarely pipeline. What one read brings in
/// is all that can wait here.
///
/// Graceful shutdown (`ChannelShouldQuiesceEvent`): an idle connection closes at once; otherwise the response under
/// way says `Connection: close`, and the connection closes once it and its request have ended.
/// Event-loop bound.
final class PipeliningGate: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where the current request and its response are.
    enum Phase: Equatable {
        /// No request under way.
        case idle
        /// A head went in: its request and its response both have yet to end.
        case bothPending
        /// The request ended: the response is due. What arrives now waits.
        case responsePending
        /// The response ended first (an early answer): the rest of the request is still read and delivered.
        case requestPending
    }

    /// Graceful shutdown's progress.
    enum Shutdown: Equatable {
        case none
        /// Asked while a request was still arriving: the connection closes after its response.
        case afterRequestEnds
        /// The last request has ended: the connection closes when its response has.
        case afterResponseEnds
        /// Closing: nothing more is read or delivered.
        case closing
    }

    private enum Waiting {
        case read(NIOAny)
        case error(any Error)
        case inputClosed
    }

    private(set) var phase = Phase.idle
    private(set) var shutdown = Shutdown.none
    private var waiting = CircularBuffer<Waiting>(initialCapacity: 0)
    /// A `read` was held back and is owed to the channel.
    private var readPending = false
    /// A CONNECT or `Upgrade` request went through: NIO's decoder stopped after it, and keeps what it reads.
    private var decoderStopped = false
    /// A part came through in the current read.
    private var partsThisRead = false
    /// While the response is due, a read brought bytes and no part: the decoder holds them, or dropped them.
    private var readBroughtNoPart = false

    /// Graceful shutdown has taken the last request: nothing more is read or delivered.
    private var shutdownStopsReading: Bool { shutdown == .afterResponseEnds || shutdown == .closing }

    /// Reading is held while a response is due and something waits for it (or the decoder would have to keep it).
    private var holdsReads: Bool {
        phase == .responsePending && (!waiting.isEmpty || decoderStopped || readBroughtNoPart)
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partsThisRead = true
        guard !shutdownStopsReading else { return }
        if !waiting.isEmpty || phase == .responsePending {
            waiting.append(.read(data))
        } else {
            deliver(data, context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if phase == .responsePending && !partsThisRead { readBroughtNoPart = true }
        partsThisRead = false
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError, phase == .responsePending || !waiting.isEmpty {
            waiting.append(.error(error))
        } else {
            deliverError(error, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            quiesce(context: context)
        } else if case .inputClosed = event as? ChannelEvent, phase == .responsePending, !waiting.isEmpty {
            waiting.append(.inputClosed)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        waiting.removeAll()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // What waited goes on to whoever comes next (a tunnel's handlers), then the owed read.
        let left = waiting
        waiting.removeAll()
        for event in left {
            switch event {
            case .read(let data): context.fireChannelRead(data)
            case .error(let error): context.fireErrorCaught(error)
            case .inputClosed: context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        if shutdown == .afterRequestEnds || shutdown == .afterResponseEnds {
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
        if readPending {
            readPending = false
            context.read()
        }
    }

    // MARK: outbound

    func read(context: ChannelHandlerContext) {
        guard !shutdownStopsReading else { return }
        if holdsReads {
            readPending = true
        } else {
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where shutdown != .none && head.status.code >= 200:
            if head.isKeepAlive { head.headers.replaceOrAdd(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .head, .body:
            context.write(data, promise: promise)
        case .end:
            let closes = shutdown == .afterResponseEnds || (shutdown == .afterRequestEnds && phase == .responsePending)
            if closes {
                shutdown = .closing
                let channel = context.channel
                let written = context.write(data)
                written.cascade(to: promise)
                written.whenComplete { _ in channel.close(promise: nil) }
            } else {
                context.write(data, promise: promise)
            }
            responseEnded(context: context)
        }
    }

    // MARK: the steps

    private func deliver(_ data: NIOAny, context: ChannelHandlerContext) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            phase = .bothPending
            if head.method == .CONNECT || head.headers.contains(name: "upgrade") { decoderStopped = true }
        case .body:
            break
        case .end:
            phase = phase == .requestPending ? .idle : .responsePending
            if shutdown == .afterRequestEnds {
                shutdown = .afterResponseEnds
                waiting.removeAll()
            }
            if shutdown == .afterResponseEnds && phase == .idle {
                shutdown = .closing
                context.close(promise: nil)
            }
        }
        context.fireChannelRead(data)
    }

    private func deliverError(_ error: any Error, context: ChannelHandlerContext) {
        // The protocol-error handler answers a parser error: that answer is the response now due.
        if error is HTTPParserError, phase == .idle || phase == .requestPending { phase = .responsePending }
        context.fireErrorCaught(error)
    }

    private func responseEnded(context: ChannelHandlerContext) {
        readBroughtNoPart = false
        switch phase {
        case .bothPending: phase = .requestPending
        case .responsePending: phase = .idle
        case .idle, .requestPending: break  // a second answer (hookproxy's own, after an error): nothing to track
        }
        // The next request, if one waits, and everything after it up to its own end.
        var delivered = false
        while phase != .responsePending, shutdown != .closing, let event = waiting.popFirst() {
            switch event {
            case .read(let data):
                deliver(data, context: context)
                delivered = true
            case .error(let error):
                deliverError(error, context: context)
            case .inputClosed:
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        if delivered { context.fireChannelReadComplete() }
        if readPending, !holdsReads, !shutdownStopsReading {
            readPending = false
            context.read()
        }
    }

    private func quiesce(context: ChannelHandlerContext) {
        guard shutdown == .none else { return }
        switch phase {
        case .idle:
            shutdown = .closing
            waiting.removeAll()
            context.close(promise: nil)
        case .responsePending:
            shutdown = .afterResponseEnds
            waiting.removeAll()
        case .bothPending, .requestPending:
            shutdown = .afterRequestEnds
        }
    }
}
