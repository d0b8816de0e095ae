@testable import ProxyModel
import Testing

/// The dotted-quad shortcut of `canonicalHost`: it may only skip hosts the full path would return unchanged.
struct ProxyURLHostTests {
    @Test("already canonical", arguments: ["127.0.0.1", "0.0.0.0", "255.255.255.255", "10.20.30.40", "1.2.3.4"])
    func canonicalQuads(_ host: String) {
        #expect(ProxyURL.isDottedQuad(host))
        #expect(ProxyURL.canonicalHost(host) == host)
    }

    @Test("not canonical, so rebuilt or kept by the full path",
          arguments: ["127.0.0.01", "00.0.0.0", "256.0.0.1", "1.2.3", "1.2.3.4.5", "1..2.3", ".1.2.3", "1.2.3.", "127.1",
                      "0x7f.0.0.1", "2130706433", "1.2.3.4a", "", "1.2.3.1000"])
    func otherSpellings(_ host: String) {
        #expect(!ProxyURL.isDottedQuad(host))
    }

    @Test func shortcutAgreesWithInetAton() {
        // Every host the shortcut accepts is one inet_aton reads back to the same spelling.
        for host in ["9.9.9.9", "100.0.0.200", "0.10.0.1"] {
            #expect(ProxyURL.canonicalHost(host + ".") == host)
            #expect(ProxyURL.canonicalHost(host) == host)
        }
        #expect(ProxyURL.canonicalHost("127.000.0.1") == "127.0.0.1")
        #expect(ProxyURL.canonicalHost("10.1") == "10.0.0.1")
    }
}
