import Foundation
import ProxyModel
import Testing
@testable import ProxyServer
@testable import ProxyUI

/// Every `/api/events` stream used to unpack, redact and serialize each flow itself: with N streams open (viewer
/// tabs, or a client opening many), the proxy did N times the work per exchange, on the event loops that carry the
/// traffic (50 streams cut a debug build's throughput about fivefold). The JSON is now made once per version.
@Suite struct EventCacheTests {
    @Test("one serialization per version of a flow, however many streams read it; a new version is made again")
    func sharedPerVersion() {
        let cache = EventCache()
        var made = 0
        for _ in 0..<50 { _ = cache.bytes(id: 1, version: 7) { made += 1; return [1] } }
        #expect(made == 1)
        #expect(cache.bytes(id: 1, version: 8) { made += 1; return [2] } == [2])
        #expect(made == 2)
        // A reader still at an older version gets its own bytes and does not replace the newer ones.
        #expect(cache.bytes(id: 1, version: 7) { made += 1; return [1] } == [1])
        #expect(cache.bytes(id: 1, version: 8) { made += 1; return [9] } == [2])
        #expect(made == 3)
    }

    @Test("bounded in entries and bytes")
    func bounded() {
        let cache = EventCache()
        var made = 0
        for id in 0..<(EventCache.maxEntries + 10) { _ = cache.bytes(id: id, version: 1) { made += 1; return [0] } }
        // It started over once the entries were full: the newest are still there, the oldest are made again.
        _ = cache.bytes(id: EventCache.maxEntries + 9, version: 1) { made += 1; return [0] }
        #expect(made == EventCache.maxEntries + 10)
        _ = cache.bytes(id: 0, version: 1) { made += 1; return [0] }
        #expect(made == EventCache.maxEntries + 11)
        let big = [UInt8](repeating: 0, count: EventCache.maxBytes / 2 + 1)
        _ = cache.bytes(id: -1, version: 1) { big }
        _ = cache.bytes(id: -2, version: 1) { big }
        var remade = false
        _ = cache.bytes(id: -1, version: 1) { remade = true; return big }
        #expect(remade, "two halves of the byte budget do not both stay")
    }

    @Test("the store's version of a flow changes with every update of it")
    func storeVersion() {
        let store = FlowStore()
        let url = ProxyURL(string: "http://example.test/x")!
        let record = FlowRecord(id: 5, start: Date(), client: "c", request: RequestHead(method: "GET", url: url), url: url.description)
        store.started(record)
        let first = try? #require(store.flowAndVersion(id: 5))
        store.record(record)
        let second = try? #require(store.flowAndVersion(id: 5))
        #expect(first?.flow.done == false)
        #expect(second?.flow.done == true)
        #expect((first?.version ?? 0) < (second?.version ?? 0))
        #expect(store.flowAndVersion(id: 6) == nil)
    }
}
