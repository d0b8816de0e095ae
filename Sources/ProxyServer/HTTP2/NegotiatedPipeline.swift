import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOTLS
import ProxyModel

/// What serves an intercepted tunnel (or a TLS `--reverse` listener's connection) once the client's TLS handshake has chosen a protocol by ALPN: `h2` gets an
/// HTTP/2 connection whose every stream is served by its own `ProxyRequestHandler` (through NIO's HTTP/2-to-HTTP/1
/// stream codec, so a stream is an exchange like any HTTP/1.1 request); `http/1.1`, or no ALPN, gets the HTTP/1
/// handlers of a plain connection.
///
/// Runs on the client connection's event loop.
enum NegotiatedPipeline {
    /// The protocols an intercepted tunnel offers, in order of preference (a client offering both gets `h2`).
    static let offeredProtocols = ["h2", "http/1.1"]

    /// Adds the ALPN step after the TLS server handler: it holds what the client sends until the handshake has
    /// chosen, then installs the handlers for that protocol.
    static func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, context: ProxyContext,
                            impliedScheme: String = "https", impliedAuthority: String? = nil,
                            reverse: ReverseRoute? = nil) throws {
        let negotiation = ApplicationProtocolNegotiationHandler { result, channel in
            channel.eventLoop.makeCompletedFuture {
                let pipeline = channel.pipeline.syncOperations
                if case .negotiated("h2") = result {
                    try addHTTP2Handlers(to: pipeline, channel: channel, context: context, impliedScheme: impliedScheme,
                                         impliedAuthority: impliedAuthority, reverse: reverse)
                } else {
                    try ProxyPipeline.addHTTPHandlers(to: pipeline, context: context, impliedScheme: impliedScheme,
                                                      impliedAuthority: impliedAuthority, reverse: reverse)
                }
            }
        }
        try pipeline.addHandler(HandshakeDeadline(timeoutMs: context.limits.headerTimeoutMs))
        try pipeline.addHandler(negotiation)
    }

    /// The HTTP/2 connection: the frame codec with a stream per child channel, GOAWAY on shutdown (the
    /// connection manager answers `ChannelShouldQuiesceEvent`), and the idle watcher.
    static func addHTTP2Handlers(to pipeline: ChannelPipeline.SynchronousOperations, channel: any Channel,
                                 context: ProxyContext, impliedScheme: String, impliedAuthority: String?,
                                 reverse: ReverseRoute?) throws {
        let manager = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: channel.eventLoop,
            configuration: .init(maxIdleTime: nil, maxAge: nil,
                                 maxGraceTime: .milliseconds(Int64(context.limits.shutdownGraceMs)), keepalive: nil))
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: HTTP2Limits.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2Limits.decodedHeaderBytes(context.limits.maxHeaderBytes)),
            HTTP2Setting(parameter: .initialWindowSize, value: HTTP2Limits.streamWindow),
        ]
        // Room for every stream's full window: a stream whose reading stopped (its upstream lags) must not use up
        // the connection's window and so hold back the others' request bodies.
        connection.targetWindowSize = HTTP2Limits.maxConcurrentStreams * HTTP2Limits.streamWindow
        connection.maximumSequentialContinuationFrames = HTTP2Limits.continuationFrames(context.limits.maxHeaderBytes)
        let idle = TimeAmount.milliseconds(Int64(context.limits.clientIdleTimeoutMs))
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.targetWindowSize = HTTP2Limits.streamWindow
        let streams = OpenStreams(next: manager.http2StreamDelegate)
        let h2 = NIOHTTP2Handler(
            mode: .server, eventLoop: channel.eventLoop, connectionConfiguration: connection,
            streamConfiguration: stream, streamDelegate: streams
        ) { streamChannel in
            streamChannel.eventLoop.makeCompletedFuture {
                let streamPipeline = streamChannel.pipeline.syncOperations
                // A stream whose client stops taking its response (its window never opens) has nothing written
                // complete for the idle timeout: the request handler ends its exchange, as on HTTP/1. (The
                // connection's own watch sees only the connection, which the client's other frames keep alive.)
                try streamPipeline.addHandler(IdleStateHandler(writeTimeout: idle))
                try streamPipeline.addHandler(RequestAuthority(implied: impliedAuthority ?? reverse?.target.authority))
                try streamPipeline.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                try streamPipeline.addHandler(ProxyRequestHandler(context: context, impliedScheme: impliedScheme,
                                                                  impliedAuthority: impliedAuthority, reverse: reverse))
            }
        }
        try pipeline.addHandler(EarlySettings())  // hookproxy's settings from the first request on
        try pipeline.addHandler(h2)
        try pipeline.addHandler(manager)
        try pipeline.addHandler(HTTP2IdleWatcher(context: context, streams: streams))
    }
}

/// Sizes of an intercepted HTTP/2 connection.
enum HTTP2Limits {
    /// Streams a client may have open at once (RFC 9113 recommends no fewer than 100).
    static let maxConcurrentStreams = 100
    /// Each stream's receive window: request bytes the client may send ahead of hookproxy's reading. Reading a
    /// stream stops while its upstream lags, so this bounds what one stream buffers, and one slow stream never
    /// holds back the others (each has its own window).
    static let streamWindow = 256 * 1024

    /// What NIO's HPACK decoder takes of one header block (its SETTINGS_MAX_HEADER_LIST_SIZE): past it the whole
    /// connection fails (COMPRESSION_ERROR), so it is well above `--max-header-bytes`, which the request handler
    /// checks per stream (431), as on HTTP/1.1.
    static func decodedHeaderBytes(_ maxHeaderBytes: Int) -> Int {
        min(max(maxHeaderBytes * 4, 256 * 1024), Int(Int32.max))
    }

    /// CONTINUATION frames NIO takes after one HEADERS frame before it fails the connection (ENHANCE_YOUR_CALM):
    /// enough for a block of `decodedHeaderBytes` sent at the default 16 KiB frame size, so a head under the list
    /// size gets its 431 on its own stream. (NIO's default of 5 cut every stream for a head over ~96 KiB encoded.)
    static func continuationFrames(_ maxHeaderBytes: Int) -> Int {
        decodedHeaderBytes(maxHeaderBytes) / (16 * 1024) + 1
    }

    /// A request head's size as RFC 9113 §6.5.2 counts a header list: each field's name and value, plus 32.
    static func headerListSize(_ head: HTTPRequestHead) -> Int {
        // The pseudo-header fields: :method, :scheme, :path, :authority (as Host here).
        var size = 4 * 32 + head.method.rawValue.utf8.count + head.uri.utf8.count + 6
        for (name, value) in head.headers { size += name.utf8.count + value.utf8.count + 32 }
        return size
    }
}
