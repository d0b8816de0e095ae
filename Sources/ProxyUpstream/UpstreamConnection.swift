internal import CCurl
internal import CEpoll
import Glibc
import NIOCore
import ProxyModel

/// What hears from an upstream connection that curl opened and handed over (`UpstreamEngine.connect`).
///
/// Every method is called on the event loop the connection was asked for, in order: `upstreamConnected` or
/// `upstreamConnectFailed` once; after `upstreamConnected`, `upstreamReceived` any number of times, interleaved with
/// `upstreamWritable`, then `upstreamClosed` at most once (not after the caller's own `close` or `closeWhenSent`);
/// `upstreamFinishedSending` may come before `upstreamClosed`. None may block.
public protocol UpstreamConnectionDelegate: AnyObject {
    /// Connected (and, for https, the server's chain judged by `trust` or curl): the outcome carries the timings
    /// and the trust events. The connection starts reading at once.
    func upstreamConnected(_ connection: UpstreamConnection, _ outcome: UpstreamOutcome)
    /// Not connected: the outcome's error says why (DNS, refused, TLS, a trust rejection).
    func upstreamConnectFailed(_ outcome: UpstreamOutcome)
    /// Bytes from the server (TLS already removed).
    func upstreamReceived(_ bytes: ByteBuffer)
    /// Everything written so far is on its way (the backlog that `write` reported is gone).
    func upstreamWritable()
    /// The server closed its side (nil), or the connection failed (the error). The connection is closed.
    func upstreamClosed(_ error: ProxyError?)
    /// The server closed or reset the connection while reading was held (`setReading(false)`): nothing comes after
    /// the bytes read before that, and `upstreamClosed` follows once they are delivered (reading resumes). Only a
    /// connection carried by a NIO channel knows it this early (curl does not look at a socket it is not reading).
    func upstreamFinishedSending()
}

extension UpstreamConnectionDelegate {
    public func upstreamFinishedSending() {}
}

/// A connection to the server that curl made (DNS, `--upstream-proxy` tunnel, TLS with `trust`) and then handed
/// over, for the bytes of an upgraded protocol (WebSocket, others), which curl 7.88 cannot carry as a transfer.
/// Two carriers, both on the loop that asked for it:
/// - curl's TLS on it: bytes go out with `curl_easy_send` and come in with `curl_easy_recv`, when the socket
///   watcher says the socket is ready (OpenSSL's session lives in curl);
/// - no TLS in curl: a NIO channel on a duplicate of the socket (`UpstreamChannelHandler`), so readiness comes from
///   the loop's own selector, with no hop through the watcher thread.
///
/// Loop-bound: every method must be called on its event loop.
public final class UpstreamConnection {
    public let loop: any EventLoop
    /// How many written bytes wait for the socket.
    public private(set) var bufferedBytes = 0
    weak var delegate: (any UpstreamConnectionDelegate)?
    let socket: Int32
    /// How much of what was sent the server has taken (`AcknowledgedBytes`): it grows while the server reads.
    public var acknowledgedBytes: UInt64 { AcknowledgedBytes.of(socket: socket) }
    private let engine: LoopEngine
    private var easy: CurlEasy?
    /// The transfer that made the connection. The handle's options still point into it (its error buffer, which curl
    /// writes when a send or receive fails; its context), so it lives until the handle is freed.
    private var owner: CurlTransfer?
    private var pending = CircularBuffer<ByteBuffer>()
    /// curl has been offered the first pending piece and could not send it (CURLE_AGAIN): with TLS, OpenSSL may hold
    /// a record of it, and the retry must offer the same bytes at the same address (curl does not set
    /// SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; another buffer fails the connection: "bad write retry").
    private var firstOffered = false
    private var reading = true
    private var armed = false
    private var armedEvents: UInt32 = 0
    private var scratch: ByteBuffer
    /// The NIO carrier, when there is one (see the type's comment).
    private var channel: UpstreamChannelHandler?
    /// Set by `closeWhenSent` while the backlog goes out: the next check that the server still takes bytes.
    private var closeWatch: Scheduled<Void>?
    /// `closeWhenSent`'s bound: whether the server still takes bytes (kept for the wait after the last byte, `linger`).
    private var progress: PeerProgress?
    /// Everything went out and the output is shut down: what the server still sends is read and dropped until it
    /// closes its side (`linger`).
    private var lingering = false
    static let readSize = 64 * 1024

    init(engine: LoopEngine, easy: CurlEasy, owner: CurlTransfer, socket: Int32, delegate: any UpstreamConnectionDelegate) {
        self.engine = engine
        self.loop = engine.loop
        self.easy = easy
        self.owner = owner
        self.socket = socket
        self.delegate = delegate
        self.scratch = ByteBufferAllocator().buffer(capacity: UpstreamConnection.readSize)
    }

    public var isOpen: Bool { easy != nil }

    /// Whether a NIO channel carries the bytes (else curl does).
    var isCarriedByChannel: Bool { channel != nil }

    /// Carries the bytes on `handler`'s channel from now on (before any byte was sent or received).
    func carry(on handler: UpstreamChannelHandler) {
        channel = handler
    }

    /// Queues `bytes` for the server and, with `flush` (the default), sends what the socket takes now. Returns the
    /// bytes still waiting (`upstreamWritable` tells when they are gone). Queue the pieces of one message with
    /// `flush: false` and flush after the last: they then leave in one send (one TCP segment, one TLS record).
    @discardableResult
    public func write(_ bytes: ByteBuffer, flush: Bool = true) -> Int {
        loop.preconditionInEventLoop()
        guard isOpen, closeWatch == nil else { return bufferedBytes }
        if bytes.readableBytes > 0 {
            if let channel {
                channel.queue(bytes)
            } else {
                pending.append(bytes)
            }
            // Counted here; the channel's own count (an option lookup, ~300 instructions) is read once, at the flush.
            bufferedBytes += bytes.readableBytes
        }
        return flush ? self.flush() : bufferedBytes
    }

    /// Sends what `write(_:flush: false)` queued, as far as the socket takes it now. Returns the bytes still waiting.
    @discardableResult
    public func flush() -> Int {
        loop.preconditionInEventLoop()
        guard isOpen else { return bufferedBytes }
        if let channel {
            bufferedBytes = channel.flush()
        } else if !pending.isEmpty {
            sendPending()
        }
        return bufferedBytes
    }

    /// Stops (false) or restarts (true) reading from the server: backpressure from a slow client. Ignored once
    /// `closeWhenSent` took the connection over: it reads and drops what the server sends from then on, and a relay
    /// that still holds reading (its client's channel, closing under a failed write, turned unwritable) would keep
    /// the server's close unseen until the bound.
    public func setReading(_ on: Bool) {
        loop.preconditionInEventLoop()
        guard closeWatch == nil, !lingering else { return }
        applyReading(on)
    }

    private func applyReading(_ on: Bool) {
        guard isOpen, on != reading else { return }
        reading = on
        if let channel {
            channel.setReading(on)
        } else if on {
            receive()
        } else {
            arm()
        }
    }

    /// Closes the connection at once (queued bytes are dropped); the delegate hears nothing more.
    public func close() {
        loop.preconditionInEventLoop()
        finish()
    }

    /// Closes the connection once every byte written so far has gone out, as a NIO channel closes after its pending
    /// writes: for a relay whose client left, so that what the client sent before it left still reaches the server
    /// (`close` drops it). The delegate hears nothing more, and later writes are dropped. Meanwhile what the server
    /// sends is read and dropped (a server blocked writing to a full connection may read nothing until it can), and
    /// the server's close or a failure ends it at once.
    ///
    /// Bounded like every wait on a peer: when a whole `idleTimeout` (`--idle-timeout`) passes in which the server
    /// took no byte, the connection closes and the rest is dropped, so a server that stops reading cannot hold it.
    /// Checked every quarter of `idleTimeout`: such a server is let go within 1¼ of them after its last read. Once the
    /// last byte went out, the connection lingers (`linger`) under the same bound.
    public func closeWhenSent(idleTimeout: TimeAmount) {
        loop.preconditionInEventLoop()
        guard isOpen, closeWatch == nil, !lingering else { return }
        delegate = nil
        progress = PeerProgress(timeout: idleTimeout, acknowledged: acknowledgedBytes)
        let waiting = flush()
        guard isOpen else { return }
        guard waiting > 0 else { return linger() }
        watchProgress(backlog: waiting)
        applyReading(true)  // if the relay held it; may finish (the server's close, held back with reading)
    }

    /// `closeWhenSent`'s last step, once every byte went out. Closing a socket with bytes from the server unread in
    /// it makes the kernel reset the connection, and the reset destroys what the server had not yet received (a
    /// close frame, the frames before it). So the output is shut down (a FIN after the last byte), what the server
    /// still sends is read and dropped, and the connection closes at the server's close, or once a whole
    /// `--idle-timeout` passed in which the server took nothing (`watchProgress`): a server that reads slowly is not cut
    /// off under the last bytes, and one that reads nothing, or keeps its side open, is let go.
    ///
    /// Only on a NIO carrier (no TLS in curl): through curl's TLS a bare `shutdown(SHUT_WR)` would go before the TLS
    /// close_notify that `curl_easy_cleanup` sends, and the server would see a truncated stream. There it closes at
    /// once, as before.
    private func linger() {
        guard isOpen, !lingering else { return }
        guard isCarriedByChannel else { return finish() }
        lingering = true
        closeWatch?.cancel()
        progress?.note()  // the last byte just went out
        guard Glibc.shutdown(socket, Int32(SHUT_WR)) == 0 else { return finish() }
        watchProgress(backlog: 0)
        applyReading(true)
    }

    /// While `closeWhenSent` waits, and then lingers: closes once a whole `--idle-timeout` passed in which neither
    /// did the backlog shrink nor did the server acknowledge more bytes (`PeerProgress`: a server that reads slowly
    /// takes from the kernel's buffer long before the backlog moves, since the kernel takes more only once a third of
    /// it is free).
    private func watchProgress(backlog: Int, at deadline: NIODeadline? = nil) {
        guard let due = deadline ?? progress?.firstCheck else { return finish() }
        closeWatch = loop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            closeWatch = nil
            let now = channel?.bufferedBytes ?? bufferedBytes
            guard let next = progress?.check(acknowledged: acknowledgedBytes, progressed: now < backlog) else { return finish() }
            watchProgress(backlog: now, at: next)
        }
    }

    // MARK: - readiness (loop, from the engine)

    /// Starts reading (unless the delegate already held it): the first read of a new connection.
    func startReading() {
        if let channel {
            channel.requestRead()
        } else {
            ready(events: 0, readable: true, writable: false)
        }
    }

    func ready(events: UInt32, readable: Bool, writable: Bool) {
        armed = false
        guard isOpen, channel == nil else { return }
        if writable || !pending.isEmpty { sendPending() }
        guard isOpen else { return }
        if readable && reading { receive() } else { arm() }
    }

    private func sendPending() {
        // The raw handle, not the `CurlEasy`: a reference held here would outlive a `finish` called meanwhile.
        guard let handle = easy?.handle else { return }
        let hadBacklog = bufferedBytes > 0
        joinSmallPieces()
        while var first = pending.first {
            var sent = 0
            let code = first.withUnsafeReadableBytes { bytes in
                curl_easy_send(handle, bytes.baseAddress, bytes.count, &sent)
            }
            if code == CURLE_AGAIN {
                firstOffered = true
                break
            }
            guard code == CURLE_OK else { return fail(code, "sending to") }
            bufferedBytes -= sent
            first.moveReaderIndex(forwardBy: sent)
            if first.readableBytes == 0 {
                pending.removeFirst()
                firstOffered = false
            } else {
                pending[pending.startIndex] = first
                firstOffered = true
                if sent == 0 { break }
            }
        }
        if closeWatch != nil && pending.isEmpty { return linger() }  // everything went out (`closeWhenSent`)
        arm()
        if hadBacklog && pending.isEmpty { delegate?.upstreamWritable() }
    }

    /// Joins the first queued pieces into one while they are small (a frame's header and its payload), so that they
    /// go to curl in one send: one TLS record and one segment, not one per piece. Never a first piece curl was
    /// already offered (see `firstOffered`).
    private func joinSmallPieces() {
        let limit = 16 * 1024
        guard !firstOffered, pending.count > 1, let first = pending.first, let second = pending.dropFirst().first,
              first.readableBytes + second.readableBytes <= limit else { return }
        var joined = ByteBufferAllocator().buffer(capacity: first.readableBytes + second.readableBytes)
        while let next = pending.first, joined.readableBytes + next.readableBytes <= limit {
            joined.writeImmutableBuffer(next)
            pending.removeFirst()
        }
        pending.prepend(joined)
    }

    /// Reads what is there now, up to a bound per turn so one busy connection does not hold the loop. Reading
    /// stops at `CURLE_AGAIN`; when the bound stops it instead, the rest is read on the loop's next turn, not when
    /// the socket wakes: OpenSSL may already hold the decrypted bytes, and the socket then never wakes for them.
    private func receive() {
        var turns = 0
        // The raw handle, not the `CurlEasy`: the delegate may `close` (freeing it) from inside the loop.
        while reading, let handle = easy?.handle {
            guard turns < 16 else {
                loop.assumeIsolated().execute { [self] in if reading && isOpen { receive() } }
                return
            }
            turns += 1
            scratch.clear(minimumCapacity: UpstreamConnection.readSize)
            var received = 0
            let code = scratch.withUnsafeMutableWritableBytes { bytes in
                curl_easy_recv(handle, bytes.baseAddress, bytes.count, &received)
            }
            if code == CURLE_AGAIN { break }
            guard code == CURLE_OK else { return fail(code, "receiving from") }
            if received == 0 {
                let delegate = self.delegate
                finish()
                delegate?.upstreamClosed(nil)
                return
            }
            scratch.moveWriterIndex(forwardBy: received)
            let bytes = scratch.readSlice(length: received)!
            delegate?.upstreamReceived(bytes)
        }
        arm()
    }

    /// Watches the socket (one-shot) for what is wanted now: reading unless paused, writing while bytes wait. An
    /// armed watch is changed when what is wanted changed (bytes queued while it waited for input only must also
    /// wake it when the socket takes more, or a peer that waits for those bytes never answers).
    private func arm() {
        guard isOpen else { return }
        var events: UInt32 = 0
        if reading { events |= hp_epollin() | hp_epollrdhup() }
        if !pending.isEmpty { events |= hp_epollout() }
        guard events != 0, !armed || events != armedEvents else { return }
        armed = true
        armedEvents = events
        engine.watch(self, events: events)
    }

    private func fail(_ code: CURLcode, _ what: String) {
        let reason = String(cString: curl_easy_strerror(code))
        let delegate = self.delegate
        finish()
        delegate?.upstreamClosed(ProxyError(.upstreamClosed, "hookproxy: upstream connection failed \(what) the server: \(reason)"))
    }

    // MARK: - the NIO carrier (loop, from its handler)

    func channelReceived(_ bytes: ByteBuffer) {
        guard isOpen else { return }
        delegate?.upstreamReceived(bytes)
    }

    /// Everything written so far went out.
    func channelWritable() {
        guard isOpen, bufferedBytes > 0 else { return }
        bufferedBytes = channel?.bufferedBytes ?? 0
        if closeWatch != nil { return linger() }  // everything went out (`closeWhenSent`)
        delegate?.upstreamWritable()
    }

    /// The channel closed while reading was held: `channelClosed` follows once what was read before is delivered.
    func channelClosedBehindHeldBytes() {
        guard isOpen else { return }
        delegate?.upstreamFinishedSending()
    }

    /// The channel closed: the server closed its side (nil) or the connection failed (why).
    func channelClosed(_ failure: String?) {
        guard isOpen else { return }
        let delegate = self.delegate
        finish()
        let error = failure.map { ProxyError(.upstreamClosed, "hookproxy: upstream connection failed: \($0)") }
        delegate?.upstreamClosed(error)
    }

    /// Frees curl's handle (which closes the connection) and stops watching the socket, then lets go of the transfer
    /// whose memory the handle pointed into (not before: `curl_easy_cleanup` may still write there). Once.
    func finish() {
        guard isOpen else { return }
        closeWatch?.cancel()
        closeWatch = nil
        lingering = false
        pending.removeAll()
        firstOffered = false
        bufferedBytes = 0
        channel?.close()  // its descriptor first: the socket closes with curl's, below
        channel = nil
        withExtendedLifetime(owner) {
            engine.release(self, easy: easy!)
            easy = nil  // the last reference: curl_easy_cleanup, while the transfer is still alive
        }
        owner = nil
    }
}

@available(*, unavailable)
extension UpstreamConnection: Sendable {}

/// Stands in for a transfer's delegate while curl only connects: a failure goes to the connection's delegate.
/// Loop-bound like the transfer (`@unchecked Sendable` only to sit where a transfer delegate sits).
final class ConnectOnlyDelegate: UpstreamTransferDelegate, @unchecked Sendable {
    let target: any UpstreamConnectionDelegate

    init(_ target: any UpstreamConnectionDelegate) { self.target = target }

    func didReceiveHead(_ head: ResponseHead) {}
    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow { .bytes(bytes.count) }
    func provideRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyFlow { .end }
    func didComplete(_ outcome: UpstreamOutcome) { target.upstreamConnectFailed(outcome) }
}
