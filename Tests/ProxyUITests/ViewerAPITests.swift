import Foundation
import ProxyLog
import ProxyModel
import ProxyUI
import Testing

@Suite("viewer: the JSON API")
struct ViewerAPITests {
    let store = FlowStore()
    var api: ViewerAPI { ViewerAPI(store: store, version: "9.9.9") }

    func response(_ method: String, _ path: String, _ query: String? = nil) throws -> (status: Int, headers: HeaderFields, json: Any?, body: [UInt8]) {
        let head: ResponseHead, body: [UInt8]
        switch api.answer(method: method, path: path, query: query) {
        case .response(let whole, let bytes): (head, body) = (whole, bytes)
        case .download(let start, var download):
            var bytes: [UInt8] = []
            while let part = download.next() { bytes += part }
            (head, body) = (start, bytes)
        case .events: throw CancellationError()
        }
        let json = head.headers["content-type"] == "application/json" ? try? JSONSerialization.jsonObject(with: Data(body)) : nil
        return (head.status, head.headers, json, body)
    }

    @Test("a flow is the JSONL record (same keys, redacted) plus state; its id is the record's")
    func flowIsTheJSONLRecord() throws {
        store.record(makeRecord(id: 7, body: Array(#"{"a":1}"#.utf8)))
        let flow = try #require(try response("GET", "/api/flows/7").json as? [String: Any])
        let line = JSONLWriter.line(for: Redactor().redact(makeRecord(id: 7, body: Array(#"{"a":1}"#.utf8))))
        let jsonl = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(Set(flow.keys) == Set(jsonl.keys).union(["state"]))
        #expect(flow["id"] as? Int == 7)
        #expect(flow["state"] as? String == "done")
        #expect(flow["response_body"] as? String == #"{"a":1}"#)
        let headers = try #require(flow["request_headers"] as? [[String: String]])
        #expect(headers.contains { $0["name"] == "Authorization" && $0["value"] == Redactor.mask })
    }

    @Test("GET /api/flows?after=&limit=&bodies=false; bad values are 400")
    func list() throws {
        for id in 1...5 { store.record(makeRecord(id: id, body: [1, 2, 3])) }
        let listed = try #require(try response("GET", "/api/flows", "after=2&limit=2&bodies=false").json as? [[String: Any]])
        #expect(listed.map { $0["id"] as? Int } == [3, 4])
        #expect(listed.allSatisfy { $0["response_body"] is NSNull })
        #expect(try response("GET", "/api/flows", "after=x").status == 400)
        #expect(try response("GET", "/api/flows", "limit=0").status == 400)
    }

    @Test("bodies as captured, with the flow's type, never runnable as the viewer's page")
    func bodies() throws {
        store.record(makeRecord(id: 1, body: [0, 1, 2, 255]))
        let body = try response("GET", "/api/flows/1/response/body")
        #expect(body.status == 200)
        #expect(body.body == [0, 1, 2, 255])
        #expect(body.headers["content-type"] == "application/json")
        #expect(body.headers["content-security-policy"]?.contains("sandbox") == true)
        #expect(body.headers["x-content-type-options"] == "nosniff")
        #expect(try response("GET", "/api/flows/1/request/body").body == [])
        #expect(try response("GET", "/api/flows/2").status == 404)
        #expect(try response("GET", "/api/flows/abc/response/body").status == 404)
    }

    @Test("/api/har?filter= is a HAR 1.2 file of the finished flows the filter passes")
    func har() throws {
        store.record(makeRecord(id: 1, status: 200))
        store.record(makeRecord(id: 2, status: 404))
        store.started(makeRecord(id: 3, status: nil))
        let har = try response("GET", "/api/har", "filter=4xx")
        let log = try #require((har.json as? [String: Any])?["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        let entries = try #require(log["entries"] as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["_hookproxy"] != nil)
        #expect(har.headers["content-disposition"]?.contains("attachment") == true)
        let all = try #require(((try response("GET", "/api/har").json as? [String: Any])?["log"] as? [String: Any])?["entries"] as? [Any])
        #expect(all.count == 2, "the pending flow is not in the HAR")
    }

    /// Every term is tried on every flow, one answer at a time: a review's 15,000-word filter held every other viewer
    /// answer for 115 s.
    @Test("/api/har refuses a filter of more than 64 terms or 4 KiB with 400; 64 terms pass")
    func harFilterBounded() throws {
        store.record(makeRecord(id: 1, status: 200))
        let words = (0..<65).map { "w\($0)" }
        #expect(try response("GET", "/api/har", "filter=" + words.joined(separator: "+")).status == 400)
        #expect(try response("GET", "/api/har", "filter=" + String(repeating: "a", count: 4097)).status == 400)
        #expect(try response("GET", "/api/har", "filter=" + words.prefix(64).joined(separator: "+")).status == 200)
    }

    @Test("POST /api/clear empties the store; wrong methods are 405; unknown paths 404; openapi.json is JSON")
    func routes() throws {
        store.record(makeRecord(id: 1))
        #expect(try response("GET", "/api/clear").status == 405)
        let cleared = try response("POST", "/api/clear")
        #expect((cleared.json as? [String: Any])?["cleared"] as? Int == 1)
        #expect(store.count == 0)
        #expect(try response("GET", "/api/nothing").status == 404)
        let openapi = try response("GET", "/api/openapi.json")
        #expect(((openapi.json as? [String: Any])?["paths"] as? [String: Any])?["/api/flows"] != nil)
        guard case .events = api.answer(method: "GET", path: "/api/events", query: nil) else {
            Issue.record("/api/events is not the event stream")
            return
        }
    }

    @Test("the page and its files are served from the binary, the page under a strict policy, never with CORS")
    func assets() throws {
        let page = try response("GET", "/")
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.headers["content-security-policy"]?.contains("script-src 'self'") == true)
        #expect(try response("GET", "/app.js").status == 200)
        #expect(try response("GET", "/app.css").status == 200)
        #expect(!page.headers.contains { $0.name.lowercased().hasPrefix("access-control-") })
    }
}
