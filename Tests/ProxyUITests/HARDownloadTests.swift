import Foundation
import ProxyLog
import ProxyModel
import Testing
@testable import ProxyUI

/// `GET /api/har` used to build the whole file (hundreds of MB with a full store) and hand it to the connection at
/// once: a client that did not read held all of it until the idle timeout, and N such clients N copies. It is now
/// made a part at a time (`FlowDownload`); these check the parts add up to the same bytes, and what a download
/// covers when the store changes under it.
@Suite("viewer: the HAR download, made in parts")
struct FlowDownloadTests {
    /// Flows of every kind the HAR writes differently: binary and text bodies, errors, hook events, rules.
    static func varied(_ store: FlowStore) {
        store.record(makeRecord(id: 1, body: Array(#"{"a":"\u00e9\n"}"#.utf8), rules: ["r1"]))
        store.record(makeRecord(id: 2, status: 404, body: [0, 1, 2, 0xFF, 0xFE]))
        store.started(makeRecord(id: 3, status: nil))
        store.record(makeRecord(id: 4, url: "http://other.test/p?q=1", method: "POST", status: nil, error: "upstream: refused"))
        store.record(makeRecord(id: 6, body: Array(repeating: UInt8(ascii: "x"), count: 3000)))
        store.record(makeRecord(id: 5, status: 500, body: Array("text body\r\n".utf8)))
    }

    /// The file as it was made at once before: the finished flows, redacted, that the filter passes, oldest first.
    static func whole(_ store: FlowStore, filter: String, version: String = "9.9.9") -> [UInt8] {
        let matching = FlowFilter(filter)
        let records = store.flows().filter(\.done).map { Redactor().redact($0.record) }.filter(matching.matches)
        return FlowJSON.har(records, creatorVersion: version)
    }

    static func parts(_ download: FlowDownload, minBytes: Int) -> [[UInt8]] {
        var download = download
        var parts: [[UInt8]] = []
        while let part = download.next(minBytes: minBytes) { parts.append(part) }
        return parts
    }

    static func download(_ store: FlowStore, filter: String = "") -> FlowDownload {
        FlowDownload(store: store, redactor: Redactor(), filter: FlowFilter(filter), creatorVersion: "9.9.9")
    }

    @Test("the parts add up to the file made at once, byte for byte, whatever the part size and filter",
          arguments: ["", "4xx", "-error", "host:other", "status:2xx nothing-matches"])
    func sameBytes(filter: String) throws {
        let store = FlowStore()
        Self.varied(store)
        let expected = Self.whole(store, filter: filter)
        for minBytes in [1, 100, 2048, FlowDownload.partBytes] {
            let parts = Self.parts(Self.download(store, filter: filter), minBytes: minBytes)
            #expect(parts.flatMap { $0 } == expected, "filter '\(filter)', parts of \(minBytes)")
        }
        // small parts: one flow per part (at most), so a non-reading client holds about one
        #expect(Self.parts(Self.download(store, filter: filter), minBytes: 1).count >= (filter.isEmpty ? 5 : 1))
        #expect(try JSONSerialization.jsonObject(with: Data(expected)) is [String: Any])
    }

    @Test("an empty store is a valid HAR with no entries, the same bytes as before")
    func empty() throws {
        let store = FlowStore()
        let parts = Self.parts(Self.download(store), minBytes: 1)
        #expect(parts.flatMap { $0 } == Self.whole(store, filter: ""))
        let log = try #require((try JSONSerialization.jsonObject(with: Data(parts.flatMap { $0 })) as? [String: Any])?["log"] as? [String: Any])
        #expect((log["entries"] as? [Any])?.isEmpty == true)
    }

    @Test("a download covers the finished flows kept when it began: one dropped or cleared meanwhile is left out, a later one is not in it")
    func snapshotOfIDs() throws {
        let store = FlowStore(limits: .init(maxFlows: 3))
        store.record(makeRecord(id: 1, url: "http://a.test/1"))
        store.record(makeRecord(id: 2, url: "http://a.test/2"))
        store.started(makeRecord(id: 3, url: "http://a.test/3", status: nil))
        var download = Self.download(store)
        var bytes = download.next(minBytes: 1) ?? []  // the file's head
        bytes += download.next(minBytes: 1) ?? []  // flow 1
        store.record(makeRecord(id: 3, url: "http://a.test/3"))  // finished after the download began: not in it
        store.record(makeRecord(id: 4, url: "http://a.test/4"))  // with 5, drops 1 and 2 (--ui-flows 3)
        store.record(makeRecord(id: 5, url: "http://a.test/5"))
        while let part = download.next(minBytes: 1) { bytes += part }
        #expect(download.isFinished)
        let log = try #require((try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["log"] as? [String: Any])
        let urls = (log["entries"] as? [[String: Any]])?.compactMap { ($0["request"] as? [String: Any])?["url"] as? String }
        #expect(urls == ["http://a.test/1"])
        #expect(download.next() == nil, "nothing after the end")
    }
}
