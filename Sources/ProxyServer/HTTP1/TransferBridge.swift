import NIOConcurrencyHelpers
import NIOCore
import ProxyModel
import ProxyUpstream
import Synchronization

/// Where one upstream transfer meets its exchange: request bytes waiting for curl, response events waiting for the
/// client. Each side pauses the other past a high-water mark. Both sides run on the client connection's event loop
/// (the engine drives curl there), but at different moments: curl's callbacks only queue, and the exchange drains
/// in a task of its own, so neither ever runs inside the other. The lock is uncontended; it stays so the type can
/// be Sendable.
///
/// Curl side: the `UpstreamTransferDelegate` callbacks (inside curl). Exchange side: `pushRequest`,
/// `endRequest`, `nextEvent`. The bridge keeps every request byte while `retainsRequest` so libcurl can rewind
/// (a second auth round), until the retained bytes pass the body limit.
final class TransferBridge: UpstreamTransferDelegate, @unchecked Sendable {
    /// What curl produced, in order, waiting for the event loop.
    enum Event {
        /// A 1xx (not 101) before the final head.
        case informational(ResponseHead)
        case head(ResponseHead)
        case body(ByteBuffer)
        case end(UpstreamOutcome)

        var isBody: Bool { if case .body = self { true } else { false } }
    }

    private struct State {
        var chunks: [ByteBuffer] = []
        /// Untouched copies of every chunk while the body is retained (storage is shared, not copied).
        var originals: [ByteBuffer] = []
        /// Index of the next chunk to send; chunks before it are kept only while the body is retained.
        var cursor = 0
        var unsentBytes = 0
        var retainedBytes = 0
        var retains: Bool
        var requestEnded = false
        /// The client's trailer fields, once its body ended with some.
        var requestTrailers: HeaderFields?
        var curlWaitsForRequest = false
        var clientReadPaused = false
        var events = CircularBuffer<Event>()
        var responseBytes = 0
        var curlResponsePaused = false
        var drainScheduled = false
        var upstream = Upstream.dedicated
    }

    /// How the response's connection is shared. libcurl 7.88 pauses an HTTP/2 transfer coarsely (a paused one can
    /// hold the whole connection), so one that may share its connection is not paused, and its queue counts against
    /// the shared bound.
    private enum Upstream {
        /// HTTP/1: the connection is the transfer's own; it pauses past the high-water mark.
        case dedicated
        /// HTTP/2, other transfers may share the connection: never paused, bounded instead.
        case shared
        /// HTTP/2, the engine says it is alone on its connection (`mayPause`): paused like `dedicated`, until
        /// `connectionShared`.
        case alone
    }

    static let highWater = 256 * 1024
    static let lowWater = 64 * 1024

    private let state: Mutex<State>
    private let eventLoop: any EventLoop
    private let retainLimit: Int
    /// What every multiplexed transfer's queued response counts against, together.
    private let backlog: MultiplexedBacklog
    /// Event-loop callbacks: drain response events; resume reading the client.
    private let onEvents: @Sendable () -> Void
    private let onRequestRoom: @Sendable () -> Void

    init(eventLoop: any EventLoop, retainRequest: Bool, retainLimit: Int, backlog: MultiplexedBacklog,
         onEvents: @escaping @Sendable () -> Void, onRequestRoom: @escaping @Sendable () -> Void) {
        self.eventLoop = eventLoop
        self.state = Mutex(State(retains: retainRequest))
        self.retainLimit = retainLimit
        self.backlog = backlog
        self.onEvents = onEvents
        self.onRequestRoom = onRequestRoom
    }

    deinit {
        state.withLock { state in
            if state.upstream == .shared { backlog.release(state.responseBytes) }
        }
    }

    // MARK: event loop side

    /// Queues request bytes for curl. Returns (curl must be resumed, the client should pause).
    func pushRequest(_ buffer: ByteBuffer) -> (resumeCurl: Bool, pauseClient: Bool) {
        state.withLock { state in
            state.chunks.append(buffer)
            state.unsentBytes += buffer.readableBytes
            if state.retains {
                state.originals.append(buffer)
                state.retainedBytes += buffer.readableBytes
                if state.retainedBytes > retainLimit {
                    state.retains = false
                    state.originals = []
                }
            }
            let resume = state.curlWaitsForRequest
            state.curlWaitsForRequest = false
            let pause = state.unsentBytes > TransferBridge.highWater && !state.clientReadPaused
            if pause { state.clientReadPaused = true }
            return (resume, pause)
        }
    }

    /// The whole request body's length, when its end is queued and curl has taken none of it yet.
    var completeRequestLength: Int64? {
        state.withLock { state in
            state.requestEnded && state.cursor == 0 && !state.curlWaitsForRequest ? Int64(state.unsentBytes) : nil
        }
    }

    /// Marks the request body complete, with the client's trailer fields if any. Returns whether curl must be
    /// resumed.
    func endRequest(trailers: HeaderFields? = nil) -> Bool {
        state.withLock { state in
            state.requestEnded = true
            state.requestTrailers = trailers
            defer { state.curlWaitsForRequest = false }
            return state.curlWaitsForRequest
        }
    }

    /// The next response event, unless it is body and the client cannot take it now; and whether curl may go on.
    func nextEvent(clientWritable: Bool) -> (event: Event?, resumeCurl: Bool) {
        state.withLock { state in
            guard let first = state.events.first, clientWritable || !first.isBody else {
                state.drainScheduled = false
                return (nil, false)
            }
            state.events.removeFirst()
            if case .body(let buffer) = first {
                state.responseBytes -= buffer.readableBytes
                if state.upstream == .shared { backlog.release(buffer.readableBytes) }
            }
            let resume = state.curlResponsePaused && state.responseBytes < TransferBridge.lowWater
            if resume { state.curlResponsePaused = false }
            return (first, resume)
        }
    }

    // MARK: curl side (inside curl's callbacks)

    func didReceiveInformational(_ head: ResponseHead) {
        enqueue(.informational(head), bytes: 0)
    }

    func didReceiveHead(_ head: ResponseHead) {
        if head.version.major >= 2 { state.withLock { $0.upstream = .shared } }
        enqueue(.head(head), bytes: 0)
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow {
        didReceiveBody(bytes, mayPause: { false })
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer, mayPause: () -> Bool) -> BodyFlow {
        let refusal = state.withLock { state -> BodyFlow? in
            if state.upstream == .shared, state.responseBytes >= TransferBridge.highWater, mayPause() {
                // Alone on its connection: paused as an HTTP/1 transfer is, its queue no longer the shared bound's.
                state.upstream = .alone
                backlog.release(state.responseBytes)
            }
            if state.upstream == .shared {
                let refusal: String
                // What an HTTP/2 response may queue while other transfers may share its connection: past it the
                // exchange fails (its client stream is reset) rather than pause them all.
                if state.responseBytes >= backlog.streamLimit {
                    refusal = "the client read too slowly: \(backlog.streamLimit >> 20) MiB of an HTTP/2 upstream's response waited for it, and other transfers share its connection"
                } else if !backlog.take(bytes.count, holding: state.responseBytes) {
                    refusal = "the client read too slowly, and HTTP/2 upstream responses already hold \(backlog.limit >> 20) MiB for slow clients"
                } else {
                    return nil
                }
                // The response will not be whole: what waits for the client goes now, so the failure reaches the
                // exchange at once (it would wait behind these bytes) and the memory is free.
                backlog.release(state.responseBytes)
                state.responseBytes = 0
                state.events.removeAll { $0.isBody }
                return .abort(refusal)
            }
            if state.responseBytes >= TransferBridge.highWater {
                state.curlResponsePaused = true
                return .pause
            }
            return nil
        }
        if let refusal { return refusal }
        var buffer = ByteBufferAllocator().buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        enqueue(.body(buffer), bytes: bytes.count)
        return .bytes(bytes.count)
    }

    func connectionShared() {
        state.withLock { state in
            guard state.upstream == .alone else { return }
            state.upstream = .shared
            state.curlResponsePaused = false  // (the engine resumes it)
            backlog.hold(state.responseBytes)
        }
    }

    func provideRequestBody(into target: UnsafeMutableRawBufferPointer) -> BodyFlow {
        var resumeClient = false
        let flow = state.withLock { state -> BodyFlow in
            var copied = 0
            while copied < target.count, state.cursor < state.chunks.count {
                var chunk = state.chunks[state.cursor]
                let count = min(chunk.readableBytes, target.count - copied)
                chunk.withUnsafeReadableBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: target[copied..<(copied + count)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<count]))
                }
                chunk.moveReaderIndex(forwardBy: count)
                copied += count
                if chunk.readableBytes == 0 {
                    state.cursor += 1
                } else {
                    state.chunks[state.cursor] = chunk
                }
            }
            if !state.retains && state.cursor > 0 {
                state.chunks.removeFirst(state.cursor)
                state.cursor = 0
            }
            state.unsentBytes -= copied
            if state.clientReadPaused && state.unsentBytes < TransferBridge.lowWater {
                state.clientReadPaused = false
                resumeClient = true
            }
            if copied > 0 { return .bytes(copied) }
            if state.requestEnded { return .end }
            state.curlWaitsForRequest = true
            return .pause
        }
        if resumeClient { eventLoop.execute(onRequestRoom) }
        return flow
    }

    /// A second round of the request (authentication): start the body again, if every byte was kept.
    func rewindRequestBody() -> Bool {
        state.withLock { state in
            guard state.retains else { return false }
            state.chunks = state.originals
            state.cursor = 0
            state.unsentBytes = state.retainedBytes
            return true
        }
    }

    func requestTrailers() -> HeaderFields? {
        state.withLock { $0.requestTrailers }
    }

    func didComplete(_ outcome: UpstreamOutcome) {
        enqueue(.end(outcome), bytes: 0)
    }

    private func enqueue(_ event: Event, bytes: Int) {
        let schedule = state.withLock { state -> Bool in
            state.events.append(event)
            state.responseBytes += bytes
            defer { state.drainScheduled = true }
            return !state.drainScheduled
        }
        if schedule { eventLoop.execute(onEvents) }
    }
}
