import Foundation
import ProxyModel
import ProxyUI
import Testing

/// A record as the server makes it: GET of `url`, answered `status`, with a captured response body.
func makeRecord(id: Int, url: String = "http://example.test/a", method: String = "GET", status: Int? = 200,
                body: [UInt8] = [], rules: [String] = [], events: [HookEvent] = [], error: String? = nil) -> FlowRecord {
    let parsed = ProxyURL(string: url)!
    return FlowRecord(
        id: id, start: Date(timeIntervalSince1970: 1_790_000_000), client: "127.0.0.1:5555",
        request: RequestHead(method: method, url: parsed, headers: [("Host", parsed.authority), ("Authorization", "Bearer s3cret")]),
        url: url, upstreamURL: url,
        response: status.map { ResponseHead(status: $0, headers: [("Content-Type", "application/json")]) },
        responseBodySize: body.count, responseBody: CapturedBody(bytes: body), rules: rules, events: events, error: error)
}

@Suite("viewer: the flow store")
struct FlowStoreTests {
    @Test("keeps the last --ui-flows flows, oldest dropped first")
    func countBound() {
        let store = FlowStore(limits: .init(maxFlows: 3))
        for id in 1...10 { store.record(makeRecord(id: id)) }
        #expect(store.count == 3)
        #expect(store.flows().map(\.id) == [8, 9, 10])
        #expect(store.flow(id: 7) == nil)
    }

    @Test("memory stays bounded: captured bodies count against the byte budget")
    func byteBound() {
        let store = FlowStore(limits: .init(maxFlows: 1000, maxBytes: 100_000))
        for id in 1...100 { store.record(makeRecord(id: id, body: [UInt8](repeating: 65, count: 10_000))) }
        #expect(store.bytes <= 100_000)
        #expect(store.count < 10 && store.count > 0)
        #expect(store.flows().last?.id == 100)
        // many small flows over a long run: the bookkeeping does not grow either
        for id in 101...20_000 { store.record(makeRecord(id: id)) }
        #expect(store.count <= 1000)
    }

    @Test("an exchange is pending from its start and done at its record, under one id")
    func pendingThenDone() {
        let store = FlowStore()
        store.started(makeRecord(id: 5, status: nil))
        #expect(store.flow(id: 5)?.state == "pending")
        store.record(makeRecord(id: 5))
        #expect(store.flow(id: 5)?.state == "done")
        #expect(store.count == 1)
    }

    @Test("after=ID lists newer flows in id order; clear empties the store")
    func afterAndClear() {
        let store = FlowStore()
        for id in [3, 1, 2, 4] { store.record(makeRecord(id: id)) }
        #expect(store.flows(after: 2).map(\.id) == [3, 4])
        #expect(store.flows(after: 0, limit: 2).map(\.id) == [1, 2])
        #expect(store.clear() == 4)
        #expect(store.flows().isEmpty)
        #expect(store.bytes == 0)
    }

    @Test("captured WebSocket messages count against the byte budget too")
    func webSocketBytes() {
        let store = FlowStore(limits: .init(maxFlows: 100, maxBytes: 3 << 20))
        for id in 1...4 {
            var record = makeRecord(id: id)
            record.webSocket = WebSocketLog(messages: [.init(direction: .send, time: Date(), opcode: 2, size: 1 << 20,
                                                             data: Array(repeating: 1, count: 1 << 20))])
            store.record(record)
        }
        #expect(store.count == 2, "two sessions of 1 MiB of messages each fit in 3 MiB, not four")
        #expect(store.bytes <= 3 << 20)
    }

    @Test("a flow that started and ended since the cursor is read once, at its end, even across reads")
    func latestChangeOnly() throws {
        let store = FlowStore(limits: .init(maxFlows: 3))
        let cursor = try #require(store.watch(.init(changed: {}, closed: {}))).snapshot.cursor
        store.started(makeRecord(id: 1, status: nil))
        store.started(makeRecord(id: 2, status: nil))
        store.record(makeRecord(id: 2))
        store.record(makeRecord(id: 1))
        // Two log entries per read: 1 started, 2 started | 2 done, 1 done.
        let first = store.changes(since: cursor, limit: 2)
        #expect(first.changes.isEmpty, "both flows changed again later: neither is read at its start")
        let second = store.changes(since: first.cursor, limit: 2)
        #expect(second.changes == [.flow(2), .flow(1)])
        #expect(store.flow(id: 1)?.state == "done")
        // Still pending when read: read as pending, and again when it ends.
        store.started(makeRecord(id: 3, status: nil))
        let pending = store.changes(since: second.cursor)
        #expect(pending.changes == [.flow(3)] && store.flow(id: 3)?.state == "pending")
        store.record(makeRecord(id: 3))
        // An evicted flow is not read at all.
        store.record(makeRecord(id: 4))
        store.record(makeRecord(id: 5))
        #expect(store.changes(since: pending.cursor).changes == [.flow(3), .flow(4), .flow(5)])
        store.started(makeRecord(id: 6, status: nil))
        let afterEviction = store.changes(since: pending.cursor).changes
        #expect(afterEviction == [.flow(4), .flow(5), .flow(6)], "flow 3 was evicted by flow 6")
    }

    @Test("a watcher is woken, reads each changed flow once, and is told to reset when it fell behind")
    func watching() throws {
        let store = FlowStore(limits: .init(maxFlows: 10))
        let wakeups = WakeCounter()
        let (token, snapshot) = try #require(store.watch(.init(changed: { wakeups.add() }, closed: {})))
        let cursor = snapshot.cursor
        store.started(makeRecord(id: 1, status: nil))
        store.record(makeRecord(id: 1))
        store.record(makeRecord(id: 2))
        #expect(wakeups.count == 3)
        let (changes, next) = store.changes(since: cursor)
        #expect(changes == [.flow(1), .flow(2)])
        store.clear()
        #expect(store.changes(since: next).changes == [.cleared])
        for id in 3...5000 { store.record(makeRecord(id: id)) }
        #expect(store.changes(since: next).changes == [.reset])
        store.unwatch(token)
        #expect(store.watcherCount == 0)
        store.close()
        #expect(store.watch(.init(changed: {}, closed: {})) == nil)
    }
}

final class WakeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}
