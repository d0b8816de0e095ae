import Crypto
import NIOCore
import NIOHTTP1

/// What every connection handler of one TestOrigin shares. Any thread (immutable).
struct OriginConfiguration: Sendable {
    let recorder: OriginRecorder
    let scheme: String
    let proxyCredentials: TestOrigin.Credentials?
    let bodyRecordLimit: Int
}

/// Serves one accepted connection: records each request and answers it by route (see `TestOrigin`).
/// Requests arrive one at a time (NIO's pipelining assistance holds the next until a response ends).
/// Event-loop thread only.
final class OriginHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request being received.
    struct Incoming {
        var head: HTTPRequestHead
        var rawHead: [UInt8]
        var path: String
        var query: [String: String]
        var body: [UInt8] = []
        var bodyCount = 0
        var hasher = SHA256()
    }

    /// A generated body being written with backpressure.
    struct Stream {
        var position: Int64
        var end: Int64
        var chunked: Bool
        /// Close the connection instead of ending the response (close-mid-body).
        var abort: Bool
    }

    let configuration: OriginConfiguration
    let tap: ConnectionTap
    /// Handlers to take out of the pipeline when a CONNECT turns the connection into a tunnel.
    var httpHandlers: [any RemovableChannelHandler] = []
    var incoming: Incoming?
    var stream: Stream?
    /// Streamed body bytes written to the channel whose write has not completed yet.
    var queuedBytes = 0
    var closeAfterResponse = false
    var active = true

    init(configuration: OriginConfiguration, tap: ConnectionTap) {
        self.configuration = configuration
        self.tap = tap
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let (path, query) = OriginHandler.split(head.uri)
            incoming = Incoming(head: head, rawHead: tap.scanner.takeHead(), path: path, query: query)
        case .body(let buffer):
            guard incoming != nil else { return }
            buffer.withUnsafeReadableBytes { bytes in
                incoming!.bodyCount += bytes.count
                incoming!.hasher.update(bufferPointer: bytes)
                let room = configuration.bodyRecordLimit - incoming!.body.count
                if room > 0 { incoming!.body.append(contentsOf: bytes.prefix(room)) }
            }
        case .end:
            guard let request = incoming else { return }
            incoming = nil
            configuration.recorder.record(RecordedRequest(
                connection: tap.id, method: request.head.method.rawValue, target: request.head.uri,
                version: "HTTP/\(request.head.version.major).\(request.head.version.minor)",
                rawHead: request.rawHead, body: request.body, bodyCount: request.bodyCount,
                headerFields: request.head.headers.map { RecordedRequest.Field(name: $0.name, value: $0.value) }))
            closeAfterResponse = !request.head.isKeepAlive
            if isProxyRequest(request.head) {
                serveProxyRequest(context: context, request: request)
            } else {
                route(context: context, request: request)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        stream = nil
        context.fireChannelInactive()
    }

    // MARK: writing responses

    /// Writes a response head. `contentLength` nil means chunked (or no body for statuses that have none).
    func writeHead(context: ChannelHandlerContext, status: Int, headers: [(String, String)] = [],
                   contentLength: Int64?, chunked: Bool = false) {
        var fields = HTTPHeaders(headers)
        if let contentLength { fields.replaceOrAdd(name: "Content-Length", value: String(contentLength)) }
        if chunked { fields.replaceOrAdd(name: "Transfer-Encoding", value: "chunked") }
        if closeAfterResponse { fields.replaceOrAdd(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: fields)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    /// A complete response with a small body (no body bytes for HEAD and for 1xx/204/304).
    func respond(context: ChannelHandlerContext, method: HTTPMethod, status: Int, headers: [(String, String)] = [],
                 body: [UInt8]) {
        let bodiless = status == 204 || status == 304 || (100..<200).contains(status)
        writeHead(context: context, status: status, headers: headers,
                  contentLength: bodiless ? nil : Int64(body.count))
        if !bodiless, method != .HEAD, !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        }
        finish(context: context)
    }

    func respond(context: ChannelHandlerContext, method: HTTPMethod, status: Int, headers: [(String, String)] = [],
                 text: String) {
        var headers = headers
        if !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            headers.append(("Content-Type", "text/plain"))
        }
        respond(context: context, method: method, status: status, headers: headers, body: Array(text.utf8))
    }

    /// Ends the response; closes the connection afterwards when the request asked for it.
    func finish(context: ChannelHandlerContext) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        if closeAfterResponse {
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// Starts a generated body (head already written).
    func startStream(context: ChannelHandlerContext, _ stream: Stream) {
        self.stream = stream
        pump(context: context)
    }

    /// Writes pattern bytes while the channel is writable; resumes on `channelWritabilityChanged`.
    func pump(context: ChannelHandlerContext) {
        while var current = stream, active {
            if current.position == current.end {
                stream = nil
                if current.abort {
                    let flushed = context.eventLoop.makePromise(of: Void.self)
                    context.flush()
                    context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))), promise: flushed)
                    flushed.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
                } else {
                    finish(context: context)
                }
                return
            }
            guard context.channel.isWritable else {
                context.flush()
                return
            }
            let slice = PatternBuffer.slice(at: current.position, limit: current.end - current.position)
            current.position += Int64(slice.readableBytes)
            stream = current
            let count = slice.readableBytes
            queuedBytes += count
            configuration.recorder.state.withLock { [queuedBytes] in
                $0.bytesStreamed += count
                $0.peakQueuedBytes = max($0.peakQueuedBytes, queuedBytes)
            }
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenComplete { [self] _ in queuedBytes -= count }
            context.write(wrapOutboundOut(.body(.byteBuffer(slice))), promise: written)
            if !current.chunked || current.position == current.end || !context.channel.isWritable {
                context.flush()
            }
        }
    }

    // MARK: parsing

    static func split(_ uri: String) -> (String, [String: String]) {
        guard let question = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: question)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecode(parts[0])
            query[name] = parts.count > 1 ? percentDecode(parts[1]) : ""
        }
        return (String(uri[..<question]), query)
    }

    static func percentDecode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

@available(*, unavailable)
extension OriginHandler: Sendable {}
