import Testing
@testable import ProxyUpstream

/// `ProxyConnectHeads` as a pure value: which header lines are the upstream proxy's answers to a CONNECT (from curl's
/// counters, as libcurl 7.88 reports them to a header callback), and when its 407s stop being answered.
struct ProxyConnectHeadsTests {
    /// Feeds `lines` (each with CRLF added); returns how many were taken before `feed` said stop (nil: never).
    static func feed(_ heads: inout ProxyConnectHeads, _ lines: [String]) -> Int? {
        for (index, line) in lines.enumerated() {
            let bytes = Array((line + "\r\n").utf8)
            if !bytes.withUnsafeBytes({ heads.feed($0) }) { return index }
        }
        return nil
    }

    static let stale = ["HTTP/1.1 407 Proxy Authentication Required",
                        "Proxy-Authenticate: Digest realm=\"p\", nonce=\"n\", stale=true", "Content-Length: 0", ""]

    @Test("the fifth 407 (after 4 answers) stops, naming the scheme offered")
    func staleLoopStops() {
        var heads = ProxyConnectHeads()
        let rounds = [[String]](repeating: Self.stale, count: 5).flatMap { $0 }
        #expect(Self.feed(&heads, rounds) == rounds.count - 1, "stops at the blank line ending the fifth 407")
        #expect(heads.answered == 4)
        #expect(heads.stopReason == "it asked for credentials again after 4 answers (407 Digest realm=\"p\", nonce=\"n\", stale=true)")
    }

    @Test("a 407 answered, then the tunnel: nothing stops")
    func answeredThenTunnel() {
        var heads = ProxyConnectHeads()
        let lines = Self.stale + ["HTTP/1.1 200 Connection established", "X-Proxy: yes", ""]
        #expect(Self.feed(&heads, lines) == nil)
        #expect(heads.answered == 1)
    }

    @Test("which lines are the proxy's: a fresh tunnel, a reused one, and a challenge answered on a new tunnel")
    func connectLines() {
        // (pretransfer µs, connections made, the proxy's?) as libcurl 7.88 reported them with each line.
        func classify(_ readings: [(Int64, Int)]) -> [Bool] {
            var heads = ProxyConnectHeads()
            return readings.map { heads.isConnectLine(pretransferMicros: $0.0, connects: $0.1) }
        }
        // 407, 200 Connection established, the server's 200 (two lines)
        #expect(classify([(0, 1), (0, 1), (57_072, 1), (57_072, 1)]) == [true, true, false, false])
        // a reused connection: no CONNECT
        #expect(classify([(0, 0), (56, 0)]) == [false, false])
        // 200 Connection established, the server's 401 (it closes), the new tunnel's 200, the server's 200
        #expect(classify([(0, 1), (868, 1), (868, 2), (1_220, 2), (1_220, 2)]) == [true, false, true, false, false])
    }
}
