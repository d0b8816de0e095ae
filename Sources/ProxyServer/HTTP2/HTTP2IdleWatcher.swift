import NIOCore
import NIOHTTP2

/// Closes an intercepted HTTP/2 connection that stays silent for the client idle timeout with no stream open;
/// streams in flight are the exchanges' to time out. Sits last in the connection's pipeline, where
/// `IdleWatch` reports silence; `OpenStreams` counts the streams (NIO's inline multiplexer tells its stream
/// delegate when a stream opens or closes, not the pipeline).
/// Event-loop bound.
final class HTTP2IdleWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let proxy: ProxyContext
    private let streams: OpenStreams

    init(context: ProxyContext, streams: OpenStreams) {
        self.proxy = context
        self.streams = streams
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent, streams.count == 0 {
            proxy.logger.debug("\(context.remoteAddress?.description ?? "client"): HTTP/2 connection idle: closing")
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIO resets a stream that breaks its framing, then hands the stream's error to the connection's pipeline
        // with no mark of whose it is: an error that comes as NIO closes a stream is that stream's alone, and the
        // connection's other streams carry on. (A connection error NIO answers with GOAWAY; should it also close
        // the streams, the connection is left to the idle timeout.)
        if error is NIOHTTP2Errors.StreamError || streams.closedThisTurn || Self.isMalformedHeaderBlock(error) {
            proxy.logger.debug("HTTP/2 stream error: \(error)")
            return
        }
        proxy.logger.debug("HTTP/2 connection error: \(error)")
        context.close(promise: nil)
    }
}

extension HTTP2IdleWatcher {
    /// What NIO's header-block and content-length validation throws: a malformed request or trailers, or a body longer
    /// or shorter than its content-length, always one stream's error (RFC 9113 §8.1.1), which NIO resets before the
    /// stream opens (so `closedThisTurn` never sees it) and reports as itself. NIO's umbrella protocol for the
    /// content-length errors is internal, so each type is named.
    static func isMalformedHeaderBlock(_ error: any Error) -> Bool {
        switch error {
        case is NIOHTTP2Errors.MissingPseudoHeader, is NIOHTTP2Errors.DuplicatePseudoHeader,
             is NIOHTTP2Errors.PseudoHeaderAfterRegularHeader, is NIOHTTP2Errors.UnsupportedPseudoHeader,
             is NIOHTTP2Errors.InvalidPseudoHeaders, is NIOHTTP2Errors.InvalidStatusValue,
             is NIOHTTP2Errors.InvalidHTTP2HeaderFieldName, is NIOHTTP2Errors.ForbiddenHeaderField,
             is NIOHTTP2Errors.InvalidPseudoHeaderValue, is NIOHTTP2Errors.UnknownPseudoHeader,
             is NIOHTTP2Errors.EmptyPathHeader, is NIOHTTP2Errors.InvalidHTTP2HeaderFieldValue,
             is NIOHTTP2Errors.ContentLengthHeadersMismatch, is NIOHTTP2Errors.ContentLengthHeaderNegative,
             is NIOHTTP2Errors.ContentLengthHeaderMalformedValue, is NIOHTTP2Errors.ContentLengthViolated:
            true
        default:
            false
        }
    }
}

@available(*, unavailable)
extension HTTP2IdleWatcher: Sendable {}

/// The streams open on one HTTP/2 connection, as NIO's handler reports them to its stream delegate; every report
/// goes on to `next` (NIO's connection manager, which needs them for its graceful shutdown).
/// Event-loop bound: NIO calls it on the connection's loop, where the watcher reads it (hence `@unchecked`).
final class OpenStreams: NIOHTTP2StreamDelegate, @unchecked Sendable {
    private let next: any NIOHTTP2StreamDelegate
    private(set) var count = 0
    /// Whether a stream closed in the event loop's current turn.
    private(set) var closedThisTurn = false

    init(next: any NIOHTTP2StreamDelegate) {
        self.next = next
    }

    func streamCreated(_ id: HTTP2StreamID, channel: any Channel) {
        count += 1
        next.streamCreated(id, channel: channel)
    }

    func streamClosed(_ id: HTTP2StreamID, channel: any Channel) {
        count = max(0, count - 1)
        if !closedThisTurn {
            closedThisTurn = true
            channel.eventLoop.assumeIsolated().execute { self.closedThisTurn = false }
        }
        next.streamClosed(id, channel: channel)
    }
}
