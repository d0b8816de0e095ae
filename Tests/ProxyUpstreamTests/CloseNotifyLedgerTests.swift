@testable import ProxyUpstream
import Testing

/// The ledger of close_notify per upstream TLS connection (`CloseNotifyLedger`). OpenSSL's info callback calls
/// `received`; here the tests do, with made-up connection addresses.
@Suite("Close-notify ledger")
struct CloseNotifyLedgerTests {
    /// A review ran 300 close-delimited HTTPS downloads at once: the ledger kept 256 entries, pushed the oldest out,
    /// and 44 downloads that ended with close_notify were reported cut short.
    @Test("every watched connection under way keeps its entry, however many there are")
    func manyAtOnce() {
        let base: UInt = 0x7000_0000_0000
        let connections = (0..<1000).map { base + UInt($0) * 64 }
        for connection in connections { CloseNotifyLedger.expect(connection) }
        for connection in connections { CloseNotifyLedger.received(connection) }
        #expect(connections.filter { CloseNotifyLedger.take($0) != true }.isEmpty)
    }

    @Test("a connection nobody watches is unknown, not truncated; a forgotten one likewise")
    func unknownIsNotTruncated() {
        let connection: UInt = 0x7100_0000_0040
        CloseNotifyLedger.received(connection)
        #expect(CloseNotifyLedger.take(connection) == nil)
        CloseNotifyLedger.expect(connection)
        #expect(CloseNotifyLedger.take(connection) == false)
        CloseNotifyLedger.expect(connection)
        CloseNotifyLedger.forget(connection)
        #expect(CloseNotifyLedger.take(connection) == nil)
    }
}
