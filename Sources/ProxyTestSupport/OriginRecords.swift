import Synchronization

/// One request as the TestOrigin received it, recorded when its end arrived.
public struct RecordedRequest: Sendable, Hashable {
    /// Which accepted connection carried it (1-based, in accept order).
    public var connection: Int
    public var method: String
    /// The request target exactly as sent (origin form `/path?q`, absolute form, or `host:port` for CONNECT).
    public var target: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String
    /// Header fields in the order received, names in the case received, duplicates kept.
    public var headers: [(name: String, value: String)] {
        headerFields.map { ($0.name, $0.value) }
    }
    /// The raw head (request line and header lines, CRLF-terminated, ending with the empty line) byte for byte.
    public var rawHead: [UInt8]
    /// The body bytes, up to `TestOrigin.bodyRecordLimit`; `bodyCount` is the real length.
    public var body: [UInt8]
    public var bodyCount: Int

    var headerFields: [Field]

    struct Field: Sendable, Hashable {
        var name: String
        var value: String
    }

    /// The first value of `name` (case-insensitive), or nil.
    public func header(_ name: String) -> String? {
        headerFields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Every value of `name` (case-insensitive), in order.
    public func headerValues(_ name: String) -> [String] {
        headerFields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }
}

/// One accepted TCP connection as the TestOrigin saw it.
public struct ConnectionRecord: Sendable, Hashable {
    /// 1-based, in accept order.
    public var id: Int
    /// Application bytes received (after TLS decryption on a TLS origin).
    public var bytesReceived: Int
    /// Whether a TLS handshake completed on it.
    public var tlsHandshakeCompleted: Bool
    /// Whether the client presented a certificate (TLS origins that require one).
    public var clientCertificatePresented: Bool
    public var closed: Bool
}

/// Everything the TestOrigin records, shared between its event loop handlers and the test. Any thread.
final class OriginRecorder: Sendable {
    struct State {
        var requests: [RecordedRequest] = []
        var connections: [ConnectionRecord] = []
        var digestNonces: Set<String> = []
        var digestSuccesses = 0
        /// Body bytes of `/bytes`, `/chunked` and `/close-mid-body` handed to the socket so far, all requests.
        var bytesStreamed = 0
        /// The most streamed body bytes queued on one socket and not yet written to it, at any moment.
        var peakQueuedBytes = 0
        var openChannels: [Int: any ChannelCloser] = [:]
        /// `/held?key=K` responses waiting for `release(K)`, and the keys already released.
        var held: [String: [@Sendable () -> Void]] = [:]
        var released: Set<String> = []
    }

    let state = Mutex(State())

    func newConnection(closer: any ChannelCloser) -> Int {
        state.withLock { state in
            let id = state.connections.count + 1
            state.connections.append(ConnectionRecord(id: id, bytesReceived: 0, tlsHandshakeCompleted: false,
                                                      clientCertificatePresented: false, closed: false))
            state.openChannels[id] = closer
            return id
        }
    }

    func update(_ id: Int, _ change: (inout ConnectionRecord) -> Void) {
        state.withLock { state in
            guard id >= 1, id <= state.connections.count else { return }
            change(&state.connections[id - 1])
        }
    }

    func closed(_ id: Int) {
        state.withLock { state in
            state.openChannels[id] = nil
            if id >= 1, id <= state.connections.count { state.connections[id - 1].closed = true }
        }
    }

    func record(_ request: RecordedRequest) {
        state.withLock { $0.requests.append(request) }
    }

    /// Runs `answer` once `key` is released (at once if it already was). Any thread.
    func hold(_ key: String, _ answer: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.released.contains(key) { return true }
            state.held[key, default: []].append(answer)
            return false
        }
        if now { answer() }
    }

    /// Releases every response held under `key`, now and later. Any thread.
    func release(_ key: String) {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.released.insert(key)
            return state.held.removeValue(forKey: key) ?? []
        }
        for answer in waiting { answer() }
    }
}

/// Something that can close one accepted connection (its channel), from any thread.
protocol ChannelCloser: Sendable {
    func closeNow()
}
