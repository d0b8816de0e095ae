import ProxyModel
import ProxyUI
import Testing

@Suite("viewer: the filter language")
struct FlowFilterTests {
    let api = makeRecord(id: 1, url: "http://api.example.test/users?id=1", status: 200, rules: ["mock-users"])
    let missing = makeRecord(id: 2, url: "http://cdn.example.test/logo.png", status: 404)
    let failed = makeRecord(id: 3, url: "https://pinned.example.test/", method: "POST", status: nil,
                            events: [HookEvent(hook: .trust, action: "rejected", detail: "no pin matched")],
                            error: "trust rejected")
    var all: [FlowRecord] { [api, missing, failed] }

    func ids(_ text: String) -> [Int] { all.filter(FlowFilter(text).matches).map(\.id) }

    @Test func empty() { #expect(ids("") == [1, 2, 3]) }
    @Test func text() { #expect(ids("users") == [1]); #expect(ids("LOGO") == [2]) }
    @Test func host() { #expect(ids("host:cdn") == [2]) }
    @Test func status() {
        #expect(ids("4xx") == [2])
        #expect(ids("status:2xx") == [1])
        #expect(ids("200") == [1])
    }
    @Test func method() { #expect(ids("POST") == [3]); #expect(ids("method:get") == [1, 2]) }
    @Test func rule() { #expect(ids("rule:mock-users") == [1]) }
    @Test func hook() { #expect(ids("hook:trust") == [3]); #expect(ids("hook:redirect") == []) }
    @Test func error() { #expect(ids("error") == [3]) }
    @Test("words all hold; a leading - negates one")
    func combined() {
        #expect(ids("host:example -4xx") == [1, 3])
        #expect(ids("GET host:api") == [1])
    }
}
