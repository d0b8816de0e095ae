import Foundation
import ProxyModel
@testable import ProxyUI
import Testing

/// The flow store keeps records packed into one byte array each (issue 17's cost): unpacking must give back the
/// very record that was packed, every field of it.
@Suite("viewer: packed flows")
struct PackedFlowTests {
    /// A record with every field set to something other than its default, odd values included.
    static func fullRecord() -> FlowRecord {
        let chain = [CertificateSummary(subject: "CN=leaf", issuer: "CN=root ✓", notAfter: "2030-01-01T00:00:00Z", pin: "sha256/AAAA="),
                     CertificateSummary(subject: "CN=root ✓", issuer: "CN=root ✓", notAfter: "2040-01-01T00:00:00Z", pin: "sha256/BBBB=")]
        var webSocket = WebSocketLog(protocolName: "websocket", isOpening: true, messages: [
            .init(direction: .send, time: Date(timeIntervalSinceReferenceDate: 812_345_678.123_456), opcode: 1, size: 5, data: Array("héllo".utf8)),
            .init(direction: .receive, time: Date(timeIntervalSinceReferenceDate: 812_345_679.5), opcode: 2, size: 70_000,
                  data: [0, 255, 7], truncated: true),
        ], close: .init(code: 4001, reason: "done here", by: .server))
        webSocket.sentMessages = 1
        webSocket.sentBytes = 5
        webSocket.receivedMessages = 2
        webSocket.receivedBytes = 70_003
        var url = ProxyURL(string: "https://[::1]:8443/p%20ath;x?q=1&empty=")!
        url.host = "::1"
        return FlowRecord(
            id: 42, start: Date(timeIntervalSinceReferenceDate: 812_345_677.000_123), client: "[::1]:50505",
            request: RequestHead(method: "PATCH", url: url, version: HTTPVersionNumber(major: 2, minor: 0),
                                 headers: [("Host", "[::1]:8443"), ("X-Empty", ""), ("x-dup", "1"), ("X-Dup", "2 ✓")]),
            url: "https://[::1]:8443/p%20ath;x?q=1&empty=", upstreamURL: "https://127.0.0.1:9/other",
            response: ResponseHead(status: 599, reason: "Odd Reason", version: .http1_1, headers: [("Set-Cookie", "a=b")]),
            requestBodySize: 10, responseBodySize: 1 << 40,
            requestBody: CapturedBody(bytes: [], truncated: true), responseBody: CapturedBody(bytes: Array(0...255), truncated: false),
            timings: Timings(dns: 0.5, connect: nil, tls: 12.25, firstByte: -1, total: .infinity),
            durationMs: 3.75, rules: ["first", "second ✓"],
            events: [HookEvent(hook: .trust, action: "accepted", detail: "step 1", chain: chain),
                     HookEvent(hook: .redirect, action: "followed", detail: "", chain: [])],
            error: "hookproxy: an error", hop: 3, serverIP: "::1", connectionID: "17", secretValues: ["s3cret", ""],
            webSocket: webSocket, responseTrailers: [("grpc-status", "7"), ("grpc-message", "no ✓")])
    }

    @Test("a record with every field set comes back as it went in")
    func roundTrip() {
        let record = Self.fullRecord()
        // Every stored property is set in the sample (a field added to FlowRecord later must be added here, and
        // then to the packing, or this test fails).
        for child in Mirror(reflecting: record).children {
            let value = child.value
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional { #expect(!mirror.children.isEmpty, "\(child.label ?? "?") is nil in the sample") }
            if let array = value as? [Any] { #expect(!array.isEmpty, "\(child.label ?? "?") is empty in the sample") }
        }
        let writer = PackedFlow.pack(record)
        let unpacked = writer.withBytes { FlowSegments.alone($0) }.record
        var before = "", after = ""
        dump(record, to: &before)
        dump(unpacked, to: &after)
        #expect(before == after)
        #expect(unpacked.request == record.request)
        #expect(unpacked.response == record.response)
        #expect(unpacked.webSocket == record.webSocket)
        #expect(unpacked.events == record.events)
        #expect(unpacked.start == record.start)
    }

    @Test("read without bodies: the same record, its captured bodies left out")
    func withoutBodies() {
        var record = Self.fullRecord()
        let writer = PackedFlow.pack(record)
        let unpacked = writer.withBytes { FlowSegments.alone($0) }.unpack(bodies: false)
        #expect(unpacked.requestBody == nil && unpacked.responseBody == nil)
        record.requestBody = nil
        record.responseBody = nil
        var before = "", after = ""
        dump(record, to: &before)
        dump(unpacked, to: &after)
        #expect(before == after)
    }

    @Test("a bare record (nothing optional set) comes back as it went in")
    func bareRoundTrip() {
        let record = FlowRecord(id: 1, start: Date(timeIntervalSince1970: 0), client: "", request: RequestHead(method: "GET", url: ProxyURL(string: "http://a/")!), url: "")
        var before = "", after = ""
        dump(record, to: &before)
        let writer = PackedFlow.pack(record)
        dump(writer.withBytes { FlowSegments.alone($0) }.record, to: &after)
        #expect(before == after)
    }

    @Test("the store hands back what it was given, and its estimate is close to the packed size")
    func storeRoundTrip() throws {
        let store = FlowStore()
        let record = Self.fullRecord()
        store.record(record)
        let flow = try #require(store.flow(id: 42))
        var before = "", after = ""
        dump(record, to: &before)
        dump(flow.record, to: &after)
        #expect(before == after)
        #expect(flow.state == "pending", "an opening WebSocket record is pending")

        let plain = makeRecord(id: 7, body: Array(repeating: 1, count: 1024))
        let packed = PackedFlow.pack(plain)
        let estimate = PackedFlow.estimatedSize(of: plain)
        #expect(estimate >= packed.count && estimate <= packed.count + 512, "\(estimate) for \(packed.count) bytes")
    }

    @Test("flows packed end to end across segments read back whole; a segment goes when its last flow is evicted")
    func segments() throws {
        let store = FlowStore(limits: .init(maxFlows: 1000, maxBytes: 1 << 30))
        // ~2.1 KiB each, plus one larger than a whole segment: many segment boundaries.
        for id in 1...1500 {
            let size = id == 700 ? (FlowSegment.size * 3 / 2) : 2000 + id % 300
            store.record(makeRecord(id: id, url: "http://example.test/\(id)", body: (0..<size).map { UInt8(($0 + id) % 256) }))
        }
        #expect(store.count == 1000)
        for id in stride(from: 501, through: 1500, by: 7) {
            let record = try #require(store.flow(id: id)?.record)
            #expect(record.url == "http://example.test/\(id)")
            let size = id == 700 ? (FlowSegment.size * 3 / 2) : 2000 + id % 300
            #expect(record.responseBody?.bytes == (0..<size).map { UInt8(($0 + id) % 256) })
        }
        weak var first: FlowSegment?
        weak var large: FlowSegment?
        first = store.flow(id: 501)?.packed.segment
        large = store.flow(id: 700)?.packed.segment
        #expect((large?.capacity ?? 0) >= FlowSegment.size * 3 / 2, "a flow larger than a segment gets one of its size")
        for id in 1501...2600 { store.record(makeRecord(id: id)) }
        #expect(first == nil, "every flow of the oldest segment is gone, and so is the segment")
        #expect(large == nil)
        store.clear()
        #expect(store.count == 0)
    }
}
