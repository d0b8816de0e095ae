import Testing
import ProxyModel
@testable import ProxyServer

/// Issue 11, item 9: --max-connections and curl's connection cache fit the process's descriptor limit.
@Suite struct FileDescriptorBudgetTests {
    @Test func enoughDescriptorsChangeNothing() {
        let budget = FileDescriptorBudget.plan(limit: 65536, maxConnections: 1024, maxCachedConnections: 512)
        #expect(budget.maxConnections == 1024 && budget.maxCachedConnections == 512 && budget.warning == nil)
    }

    @Test func theCacheShrinksFirst() {
        // 2 × 1024 + 64 = 2112 for the connections; 2400 leaves 288 for the cache
        let budget = FileDescriptorBudget.plan(limit: 2400, maxConnections: 1024, maxCachedConnections: 512)
        #expect(budget.maxConnections == 1024)
        #expect(budget.maxCachedConnections == 288)
        #expect(budget.warning?.contains("cache is lowered from 512 to 288") == true)
    }

    @Test func thenTheConnectionLimitWithAMessageSayingHowToKeepIt() {
        let budget = FileDescriptorBudget.plan(limit: 1024, maxConnections: 1024, maxCachedConnections: 512)
        #expect(budget.maxCachedConnections == FileDescriptorBudget.minimumCache)
        #expect(budget.maxConnections == (1024 - 64 - 16) / 2)
        #expect(2 * budget.maxConnections + 64 + budget.maxCachedConnections <= 1024)
        #expect(budget.warning?.contains("--max-connections lowered from 1024 to 472; raise the limit to at least 2624") == true,
                "\(budget.warning ?? "")")
        #expect(budget.refusal == nil)
    }

    /// Below the reserve, start-up failed on the way (a precondition in the upstream socket watcher, an assertion
    /// in NIO's selector) instead of saying why.
    @Test func belowTheReserveItRefusesToStart() {
        let budget = FileDescriptorBudget.plan(limit: 20, maxConnections: 1024, maxCachedConnections: 512)
        #expect(budget.refusal == "hookproxy: only 20 file descriptors are allowed (ulimit -n); hookproxy needs at least 64: raise the limit")
        #expect(FileDescriptorBudget.plan(limit: 64, maxConnections: 1024, maxCachedConnections: 512).refusal == nil)
    }
}

/// Issue 11, item 8: every spelling of the listener's own address is recognised without DNS.
@Suite struct OwnAddressTests {
    @Test(arguments: ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "localhost", "LOCALHOST.", "::1",
                      "::ffff:127.0.0.1", "127.0.0.53", "a.localhost"])
    func loopbackSpellings(_ host: String) {
        #expect(RequestClassifier.isOwnAddress(.init(scheme: "http", host: host, port: 8080), listening: ("127.0.0.1", 8080)))
    }

    @Test(arguments: ["example.com", "10.0.0.1", "128.0.0.1", "::2"])
    func otherHosts(_ host: String) {
        #expect(!RequestClassifier.isOwnAddress(.init(scheme: "http", host: host, port: 8080), listening: ("127.0.0.1", 8080)))
    }

    @Test func anotherPortIsNotSelf() {
        #expect(!RequestClassifier.isOwnAddress(.init(scheme: "http", host: "127.0.0.1", port: 8081), listening: ("127.0.0.1", 8080)))
    }
}

/// Issue 11, item 10: rules see one spelling of a host that libcurl reaches under several.
@Suite struct HostSpellingTests {
    @Test(arguments: [("http://api.example.com./x", "api.example.com"), ("http://0x0a000001/", "10.0.0.1"),
                      ("http://10.1:8080/", "10.0.0.1"), ("http://2130706433/", "127.0.0.1"), ("http://Example.COM/", "Example.COM")])
    func canonicalSpelling(_ url: String, _ host: String) throws {
        #expect(try #require(ProxyURL(string: url)).host == host)
    }
}
