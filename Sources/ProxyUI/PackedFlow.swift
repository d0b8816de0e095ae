import FoundationEssentials
import ProxyModel

/// A `FlowRecord` as the flow store keeps it: packed bytes (`PackedWriter`) in a `FlowSegment`, instead of the
/// record's dozen or more allocations (header arrays, strings, captured bodies). The store holds thousands of flows
/// and frees each one thousands of exchanges after it was made, from whichever event loop evicts it; as separate
/// allocations those frees hit cold memory and other threads' malloc arenas, and cost more than making the record
/// (bench/README.md, issue 17). The record is unpacked only when the viewer's API reads it.
struct PackedFlow: Sendable {
    let segment: FlowSegment
    let offset: Int
    let count: Int

    /// The record's bytes, to be stored (`FlowSegments.store`) before the writer ends.
    static func pack(_ record: FlowRecord) -> PackedWriter {
        var writer = PackedWriter(capacity: PackedFlow.estimatedSize(of: record))
        writer.flowRecord(record)
        return writer
    }

    var record: FlowRecord { unpack(bodies: true) }

    /// The record; without `bodies` the captured bodies are skipped, not copied (the list and the event stream
    /// leave them to `/api/flows/ID`).
    func unpack(bodies: Bool) -> FlowRecord {
        withExtendedLifetime(segment) {
            var reader = PackedReader(UnsafeRawBufferPointer(start: segment.base + offset, count: count))
            reader.skipsBodies = !bodies
            let record = reader.flowRecord()
            precondition(reader.isAtEnd, "packed flow: bytes left after the record")
            return record
        }
    }

    /// A first guess at the packed size, from sizes known without walking the headers (`count`s, bodies): over
    /// for the common record; a header-heavy one grows the writer once more.
    static func estimatedSize(of record: FlowRecord) -> Int {
        let headers = record.request.headers.count + (record.response?.headers.count ?? 0)
        var total = 512 + record.url.utf8.count * 2 + headers * 96 + record.events.count * 160 + record.rules.count * 32
        total += (record.requestBody?.bytes.count ?? 0) + (record.responseBody?.bytes.count ?? 0)
        if let webSocket = record.webSocket { total += webSocket.messages.reduce(64) { $0 + 48 + $1.data.count } }
        return total
    }
}

/// A block of memory that packed flows are copied into, end to end; freed when the last flow in it is gone.
/// Bytes below `used` never change once written, so readers need no lock (they hold the segment alive).
final class FlowSegment: @unchecked Sendable {
    static let size = 1 << 20
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// Bytes written so far: changed only under the store's lock.
    var used = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }
}

/// Where a store copies its finished flows: the current 1 MiB segment, or a new one when it is full. Eviction goes
/// oldest first, so a segment's flows go at about the same time and the segment with them: one allocation per
/// megabyte of flows instead of a dozen per flow. Guarded by the store's lock.
struct FlowSegments {
    private var current: FlowSegment?

    mutating func store(_ bytes: UnsafeRawBufferPointer) -> PackedFlow {
        let count = bytes.count
        let segment: FlowSegment
        if let current, current.capacity - current.used >= count {
            segment = current
        } else {
            segment = FlowSegment(capacity: max(FlowSegment.size, count))
            current = segment
        }
        let offset = segment.used
        if let source = bytes.baseAddress { (segment.base + offset).copyMemory(from: source, byteCount: count) }
        segment.used += count
        return PackedFlow(segment: segment, offset: offset, count: count)
    }

    /// A flow that will be replaced (a pending one): a segment of its own, so that it pins no shared one while it
    /// stays pending (an open WebSocket may for hours).
    static func alone(_ bytes: UnsafeRawBufferPointer) -> PackedFlow {
        var own = FlowSegments()
        own.current = FlowSegment(capacity: bytes.count)
        return own.store(bytes)
    }

    mutating func removeAll() { current = nil }
}

// MARK: - writing, field by field (reading below follows the same order)

extension PackedWriter {
    mutating func flowRecord(_ record: FlowRecord) {
        int(record.id)
        double(record.start.timeIntervalSinceReferenceDate)
        string(record.client)
        requestHead(record.request)
        string(record.url)
        optional(record.upstreamURL) { $0.string($1) }
        optional(record.response) { $0.responseHead($1) }
        int(record.requestBodySize)
        int(record.responseBodySize)
        optional(record.requestBody) { $0.capturedBody($1) }
        optional(record.responseBody) { $0.capturedBody($1) }
        timings(record.timings)
        double(record.durationMs)
        array(record.rules) { $0.string($1) }
        array(record.events) { $0.hookEvent($1) }
        optional(record.error) { $0.string($1) }
        int(record.hop)
        optional(record.serverIP) { $0.string($1) }
        optional(record.connectionID) { $0.string($1) }
        array(record.secretValues) { $0.string($1) }
        optional(record.webSocket) { $0.webSocket($1) }
        optional(record.responseTrailers) { $0.headers($1) }
    }

    mutating func requestHead(_ head: RequestHead) {
        string(head.method)
        string(head.url.scheme)
        string(head.url.host)
        int(head.url.port)
        string(head.url.path)
        optional(head.url.query) { $0.string($1) }
        version(head.version)
        headers(head.headers)
    }

    mutating func responseHead(_ head: ResponseHead) {
        int(head.status)
        string(head.reason)
        version(head.version)
        headers(head.headers)
    }

    mutating func version(_ version: HTTPVersionNumber) {
        int(version.major)
        int(version.minor)
    }

    mutating func headers(_ headers: HeaderFields) {
        array(headers.fields) { writer, field in
            writer.string(field.name)
            writer.string(field.value)
        }
    }

    mutating func capturedBody(_ body: CapturedBody) {
        raw(body.bytes)
        bool(body.truncated)
    }

    mutating func timings(_ timings: Timings) {
        for value in [timings.dns, timings.connect, timings.tls, timings.firstByte, timings.total] {
            optional(value) { $0.double($1) }
        }
    }

    mutating func hookEvent(_ event: HookEvent) {
        string(event.hook.rawValue)
        string(event.action)
        string(event.detail)
        optional(event.chain) { writer, chain in
            writer.array(chain) { writer, certificate in
                writer.string(certificate.subject)
                writer.string(certificate.issuer)
                writer.string(certificate.notAfter)
                writer.string(certificate.pin)
            }
        }
    }

    mutating func webSocket(_ log: WebSocketLog) {
        string(log.protocolName)
        bool(log.isOpening)
        array(log.messages) { writer, message in
            writer.string(message.direction.rawValue)
            writer.double(message.time.timeIntervalSinceReferenceDate)
            writer.int(message.opcode)
            writer.int(message.size)
            writer.raw(message.data)
            writer.bool(message.truncated)
        }
        optional(log.close) { writer, close in
            writer.optional(close.code) { $0.int($1) }
            writer.string(close.reason)
            writer.string(close.by.rawValue)
        }
        int(log.sentMessages)
        int(log.sentBytes)
        int(log.receivedMessages)
        int(log.receivedBytes)
    }
}

// MARK: - reading

extension PackedReader {
    mutating func flowRecord() -> FlowRecord {
        let id = int()
        let start = Date(timeIntervalSinceReferenceDate: double())
        let client = string()
        let request = requestHead()
        let url = string()
        return FlowRecord(
            id: id, start: start, client: client, request: request, url: url,
            upstreamURL: optional { $0.string() },
            response: optional { $0.responseHead() },
            requestBodySize: int(),
            responseBodySize: int(),
            requestBody: optional { $0.capturedBody() } ?? nil,
            responseBody: optional { $0.capturedBody() } ?? nil,
            timings: timings(),
            durationMs: double(),
            rules: array { $0.string() },
            events: array { $0.hookEvent() },
            error: optional { $0.string() },
            hop: int(),
            serverIP: optional { $0.string() },
            connectionID: optional { $0.string() },
            secretValues: array { $0.string() },
            webSocket: optional { $0.webSocket() },
            responseTrailers: optional { $0.headers() })
    }

    mutating func requestHead() -> RequestHead {
        let method = string()
        // Memberwise, not `ProxyURL.init(scheme:…)`, which would normalize what it was given.
        var url = ProxyURL(scheme: "http", host: "")
        url.scheme = string()
        url.host = string()
        url.port = int()
        url.path = string()
        url.query = optional { $0.string() }
        return RequestHead(method: method, url: url, version: version(), headers: headers())
    }

    mutating func responseHead() -> ResponseHead {
        var head = ResponseHead(status: int())
        head.reason = string()
        head.version = version()
        head.headers = headers()
        return head
    }

    mutating func version() -> HTTPVersionNumber {
        HTTPVersionNumber(major: int(), minor: int())
    }

    mutating func headers() -> HeaderFields {
        HeaderFields(array { HeaderField(name: $0.string(), value: $0.string()) })
    }

    mutating func capturedBody() -> CapturedBody? {
        if skipsBodies {
            skipRaw()
            _ = bool()
            return nil
        }
        return CapturedBody(bytes: raw(), truncated: bool())
    }

    mutating func timings() -> Timings {
        Timings(dns: optional { $0.double() }, connect: optional { $0.double() }, tls: optional { $0.double() },
                firstByte: optional { $0.double() }, total: optional { $0.double() })
    }

    mutating func hookEvent() -> HookEvent {
        let hook = HookEvent.Hook(rawValue: string()) ?? .rule
        let action = string()
        let detail = string()
        let chain = optional { reader in
            reader.array { CertificateSummary(subject: $0.string(), issuer: $0.string(), notAfter: $0.string(), pin: $0.string()) }
        }
        return HookEvent(hook: hook, action: action, detail: detail, chain: chain)
    }

    mutating func webSocket() -> WebSocketLog {
        let protocolName = string()
        let isOpening = bool()
        let messages = array { reader in
            WebSocketLog.Message(direction: WebSocketLog.Direction(rawValue: reader.string()) ?? .send,
                                 time: Date(timeIntervalSinceReferenceDate: reader.double()),
                                 opcode: reader.int(), size: reader.int(), data: reader.raw(), truncated: reader.bool())
        }
        let close = optional { reader in
            WebSocketLog.Close(code: reader.optional { $0.int() }, reason: reader.string(),
                               by: WebSocketLog.Close.Side(rawValue: reader.string()) ?? .client)
        }
        var log = WebSocketLog(protocolName: protocolName, isOpening: isOpening, messages: messages, close: close)
        log.sentMessages = int()
        log.sentBytes = int()
        log.receivedMessages = int()
        log.receivedBytes = int()
        return log
    }
}
