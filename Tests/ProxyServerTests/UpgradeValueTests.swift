import NIOHTTP1
import ProxyModel
import Testing
@testable import ProxyServer

/// The pure decisions around upgrades: which requests hookproxy carries as upgrades, and what permessage-deflate
/// the server agreed to.
struct UpgradeValueTests {
    @Test("an upgrade is carried for a bodiless HTTP/1.1 request; its first token, lower-cased")
    func upgradeToken() {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Upgrade": "WebSocket, x-other", "Connection": "keep-alive, Upgrade"])
        #expect(UpgradeHandshake.upgradeToken(head, bodiless: true) == "websocket")
        let stray = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Upgrade": "websocket", "Connection": "keep-alive"])
        #expect(UpgradeHandshake.upgradeToken(stray, bodiless: true) == nil, "no upgrade connection option: a stray header")
        #expect(UpgradeHandshake.upgradeToken(head, bodiless: false) == nil, "a body: forwarded without the upgrade")
        head.version = .http1_0
        #expect(UpgradeHandshake.upgradeToken(head, bodiless: true) == nil, "HTTP/1.0 has no upgrade")
        #expect(UpgradeHandshake.upgradeToken(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), bodiless: true) == nil)
    }

    @Test("the upgrade headers go back on the upstream head (the classifier dropped them as hop-by-hop)")
    func restoringUpgrade() {
        let client = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Upgrade": "websocket", "Connection": "keep-alive, Upgrade"])
        let head = UpgradeHandshake.restoringUpgrade(RequestHead(method: "GET", url: ProxyURL(string: "http://a.test/")!), from: client)
        #expect(head.headers["Upgrade"] == "websocket")
        #expect(head.headers["Connection"] == "Upgrade")
    }

    @Test("permessage-deflate parameters per sender; nil when the server did not accept it")
    func deflateAgreement() {
        #expect(DeflateAgreement(serverAnswer: []) == nil)
        #expect(DeflateAgreement(serverAnswer: ["x-webkit-deflate-frame"]) == nil)
        let agreed = DeflateAgreement(serverAnswer: ["permessage-deflate; server_max_window_bits=10; client_no_context_takeover"])
        #expect(agreed?.serverWindowBits == 10)
        #expect(agreed?.clientWindowBits == 15)
        #expect(agreed?.clientNoContextTakeover == true)
        #expect(agreed?.serverNoContextTakeover == false)
    }

    /// A server's answer is peer input: none of these may stop the process (a bare `=` indexed an empty split).
    @Test("odd permessage-deflate answers are read without a crash", arguments: [
        "permessage-deflate;=", "permessage-deflate; =15", "permessage-deflate;;", "permessage-deflate; = ",
        "permessage-deflate; client_max_window_bits=", "permessage-deflate; server_max_window_bits==9",
        "permessage-deflate; server_max_window_bits=\"\"", "permessage-deflate; server_max_window_bits=99999999999",
        "permessage-deflate; client_max_window_bits=-15", ",;=,",
    ])
    func oddDeflateAnswers(answer: String) {
        let agreed = DeflateAgreement(serverAnswer: [answer])
        if answer.hasPrefix("permessage-deflate") { #expect(agreed != nil) } else { #expect(agreed == nil) }
        // A combining mark after `;` makes one Character of the two: that answer reads as no deflate, without a crash.
        #expect(DeflateAgreement(serverAnswer: [answer + ";\u{301}=\u{301}"]) == nil || answer.hasPrefix("permessage"))
    }
}
