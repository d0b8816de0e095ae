import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUpstream

/// One client request carried upstream: the bridge between the connection's event loop and the curl thread.
///
/// Event-loop side: request body in (`receiveRequestBody`, `finishRequestBody`), response out (`drainResponse`).
/// Curl side: the `UpstreamTransferDelegate` callbacks. They meet in `bridge`, under one lock, holding request
/// bytes not yet sent and response events not yet written; each side pauses the other when its buffer is full.
final class Exchange: UpstreamTransferDelegate, @unchecked Sendable {
    /// What curl produced, in order, waiting for the event loop.
    enum UpstreamEvent {
        case head(ResponseHead)
        case body(ByteBuffer)
        case end(UpstreamOutcome)
    }

    /// The state both threads touch; only under `bridge`'s lock.
    struct Bridge {
        var requestChunks = CircularBuffer<ByteBuffer>()
        var requestBytes = 0
        var requestEnded = false
        var curlWaitsForRequest = false
        var clientReadPaused = false
        var events = CircularBuffer<UpstreamEvent>()
        var responseBytes = 0
        var curlResponsePaused = false
        var drainScheduled = false
    }

    static let highWater = 256 * 1024
    static let lowWater = 64 * 1024

    let id: Int
    let proxy: ProxyContext
    let eventLoop: any EventLoop
    let clientHead: RequestHead
    let plan: FlowPlan
    private let nioHead: HTTPRequestHead
    private let request: RequestContext
    private let bridge = NIOLockedValueBox(Bridge())

    // MARK: event-loop state
    private var handler: ProxyRequestHandler?
    private var transfer: UpstreamTransfer?
    private var upstreamHead: RequestHead
    private var responseHead: ResponseHead?
    private var requestBodySize = 0
    private var responseBodySize = 0
    private var requestCapture: CapturedBody?
    private var responseCapture: CapturedBody?
    private var requestComplete = false
    private var responseComplete = false
    private var closeAfterResponse = false
    private var outcome: UpstreamOutcome?
    private var failure: String?

    init(proxy: ProxyContext, handler: ProxyRequestHandler, eventLoop: any EventLoop, clientHead: RequestHead,
         nioHead: HTTPRequestHead, plan: FlowPlan, request: RequestContext) {
        self.id = proxy.makeFlowID()
        self.proxy = proxy
        self.handler = handler
        self.eventLoop = eventLoop
        self.clientHead = clientHead
        self.nioHead = nioHead
        self.plan = plan
        self.request = request
        var upstreamHead = clientHead
        upstreamHead.headers.remove("Expect")
        plan.editRequest(&upstreamHead)
        self.upstreamHead = upstreamHead
        if proxy.configuration.captureBodies {
            requestCapture = CapturedBody()
            responseCapture = CapturedBody()
        }
        closeAfterResponse = !nioHead.isKeepAlive
    }

    // MARK: event loop: start and request body

    func start() {
        proxy.connections.exchangeStarted()
        let upstreamRequest = UpstreamRequest(head: upstreamHead, body: requestBodyFraming(), settings: proxy.engine.settings,
                                              trust: plan.trust, challenge: plan.onChallenge)
        if plan.delayMs > 0 {
            eventLoop.scheduleTask(in: .milliseconds(Int64(plan.delayMs))) { [self] in
                guard !responseComplete else { return }
                transfer = proxy.engine.start(upstreamRequest, delegate: self)
            }
        } else {
            transfer = proxy.engine.start(upstreamRequest, delegate: self)
        }
    }

    private func requestBodyFraming() -> UpstreamRequest.Body {
        if nioHead.headers.contains(name: "transfer-encoding") { return .chunked }
        if let length = nioHead.headers.first(name: "content-length").flatMap(Int64.init) {
            if length == 0 && ["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"].contains(clientHead.method) { return .none }
            return .length(length)
        }
        return .none
    }

    func receiveRequestBody(_ buffer: ByteBuffer) {
        requestBodySize += buffer.readableBytes
        requestCapture?.append(buffer, limit: proxy.limits.captureLimit)
        guard outcome == nil else { return }
        let (resumeCurl, pauseClient) = bridge.withLockedValue { bridge -> (Bool, Bool) in
            bridge.requestChunks.append(buffer)
            bridge.requestBytes += buffer.readableBytes
            let resume = bridge.curlWaitsForRequest
            bridge.curlWaitsForRequest = false
            let pause = bridge.requestBytes > Exchange.highWater && !bridge.clientReadPaused
            if pause { bridge.clientReadPaused = true }
            return (resume, pause)
        }
        if pauseClient { handler?.pauseReading() }
        if resumeCurl { transfer?.resume() }
    }

    func finishRequestBody() {
        requestComplete = true
        guard !responseComplete else {
            finishIfDone()
            return
        }
        let resumeCurl = bridge.withLockedValue { bridge -> Bool in
            bridge.requestEnded = true
            defer { bridge.curlWaitsForRequest = false }
            return bridge.curlWaitsForRequest
        }
        if resumeCurl { transfer?.resume() }
    }

    /// The client went away: stop the upstream transfer at once.
    func clientClosed() {
        guard !responseComplete else { return }
        transfer?.cancel()
        if !responseBodyDelivered { failure = failure ?? "client closed the connection" }
        responseComplete = true
        requestComplete = true
        handler = nil
        finish()
    }

    // MARK: curl thread: UpstreamTransferDelegate

    func didReceiveHead(_ head: ResponseHead) {
        enqueue(.head(head), bytes: 0)
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow {
        let paused = bridge.withLockedValue { bridge -> Bool in
            guard bridge.responseBytes < Exchange.highWater else {
                bridge.curlResponsePaused = true
                return true
            }
            return false
        }
        if paused { return .pause }
        var buffer = ByteBufferAllocator().buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        enqueue(.body(buffer), bytes: bytes.count)
        return .bytes(bytes.count)
    }

    func provideRequestBody(into target: UnsafeMutableRawBufferPointer) -> BodyFlow {
        var resumeClient = false
        let flow = bridge.withLockedValue { bridge -> BodyFlow in
            var copied = 0
            while copied < target.count, var chunk = bridge.requestChunks.first {
                let count = min(chunk.readableBytes, target.count - copied)
                chunk.withUnsafeReadableBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: target[copied..<(copied + count)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<count]))
                }
                chunk.moveReaderIndex(forwardBy: count)
                copied += count
                if chunk.readableBytes == 0 { bridge.requestChunks.removeFirst() } else { bridge.requestChunks[bridge.requestChunks.startIndex] = chunk }
            }
            bridge.requestBytes -= copied
            if bridge.clientReadPaused && bridge.requestBytes < Exchange.lowWater {
                bridge.clientReadPaused = false
                resumeClient = true
            }
            if copied > 0 { return .bytes(copied) }
            if bridge.requestEnded { return .end }
            bridge.curlWaitsForRequest = true
            return .pause
        }
        if resumeClient { eventLoop.execute { self.handler?.resumeReading() } }
        return flow
    }

    func didComplete(_ outcome: UpstreamOutcome) {
        enqueue(.end(outcome), bytes: 0)
    }

    private func enqueue(_ event: UpstreamEvent, bytes: Int) {
        let schedule = bridge.withLockedValue { bridge -> Bool in
            bridge.events.append(event)
            bridge.responseBytes += bytes
            defer { bridge.drainScheduled = true }
            return !bridge.drainScheduled
        }
        if schedule { eventLoop.execute { self.drainResponse() } }
    }

    // MARK: event loop: response out

    /// Writes what curl produced while the client keeps up; resumes curl once the backlog is small.
    func drainResponse() {
        guard let handler else {
            bridge.withLockedValue { $0.drainScheduled = false; $0.events.removeAll() }
            return
        }
        var wrote = false
        while true {
            let writable = handler.isWritable
            let (next, resumeCurl) = bridge.withLockedValue { bridge -> (UpstreamEvent?, Bool) in
                guard let first = bridge.events.first, writable || !first.isBody else {
                    bridge.drainScheduled = false
                    return (nil, false)
                }
                bridge.events.removeFirst()
                if case .body(let buffer) = first { bridge.responseBytes -= buffer.readableBytes }
                let resume = bridge.curlResponsePaused && bridge.responseBytes < Exchange.lowWater
                if resume { bridge.curlResponsePaused = false }
                return (first, resume)
            }
            if resumeCurl { transfer?.resume() }
            guard let next else { break }
            wrote = true
            switch next {
            case .head(let head): writeHead(head)
            case .body(let buffer): writeBody(buffer)
            case .end(let outcome): end(outcome)
            }
        }
        if wrote { handler.flush() }
    }

    private func writeHead(_ upstream: ResponseHead) {
        guard let handler, responseHead == nil else { return }
        var head = upstream
        HopByHop.strip(&head.headers)
        plan.editResponse(&head)
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
        guard let handler, responseHead != nil else { return }
        responseBodySize += buffer.readableBytes
        responseCapture?.append(buffer, limit: proxy.limits.captureLimit)
        handler.send(.body(.byteBuffer(buffer)))
    }

    private func end(_ outcome: UpstreamOutcome) {
        self.outcome = outcome
        guard let handler else { return }
        if responseHead == nil {
            let error = outcome.error ?? ProxyError(.upstreamFailed, "hookproxy: no response from \(upstreamHead.url.authority)")
            failure = error.message
            if !requestComplete { closeAfterResponse = true }
            let local = LocalResponse.error(error)
            writeHead(local.head)
            writeBody(handler.buffer(local.body))
        } else if let error = outcome.error {
            // The head is out: all the client can learn is that the body ended early.
            failure = error.message
            responseComplete = true
            handler.closeConnection()
            finish()
            return
        }
        responseComplete = true
        if requestComplete || closeAfterResponse {
            finish()
            handler.exchangeFinished(self, close: closeAfterResponse)
        } else {
            _ = handler.sendEnd()
        }
    }

    /// The request's end arrived after the response's: the connection is free for the next request.
    private func finishIfDone() {
        guard responseComplete, let handler else { return }
        finish()
        handler.exchangeFinished(self, close: closeAfterResponse, endAlreadySent: true)
    }

    private var recorded = false

    /// A Content-Length body fully written: the client may rightly close before curl reports the end.
    private var responseBodyDelivered: Bool {
        guard let length = responseHead?.headers["content-length"].flatMap(Int.init) else { return false }
        return responseBodySize >= length
    }

    private func finish() {
        guard !recorded else { return }
        recorded = true
        proxy.connections.exchangeEnded()
        if let error = failure { proxy.logger.debug("\(clientHead.method) \(clientHead.url): \(error)") }
        proxy.record(FlowRecord(
            id: id, start: request.start, client: request.client, request: upstreamHead, url: clientHead.url.description,
            upstreamURL: upstreamHead.url.description, response: responseHead, requestBodySize: requestBodySize,
            responseBodySize: responseBodySize, requestBody: requestCapture, responseBody: responseCapture,
            timings: outcome?.timings ?? Timings(), durationMs: Date().timeIntervalSince(request.start) * 1000,
            rules: plan.firedRules, events: plan.events + (outcome?.events ?? []), error: failure,
            serverIP: outcome?.serverIP, connectionID: outcome?.connectionID))
    }
}

extension Exchange.UpstreamEvent {
    var isBody: Bool { if case .body = self { true } else { false } }
}

extension CapturedBody {
    mutating func append(_ buffer: ByteBuffer, limit: Int) {
        let room = limit - bytes.count
        if buffer.readableBytes > room { truncated = true }
        guard room > 0 else { return }
        bytes.append(contentsOf: buffer.readableBytesView.prefix(room))
    }
}
