import ProxyModel
import ProxyReplay
import Testing

/// `ReplayReport`: the line per request, the summary, the exit status.
@Suite("Replay: report lines and exit status")
struct ReplayReportTests {
    static func result(_ recorded: (Int, Int), _ now: (Int, Int)?, failure: String? = nil,
                       disposition: ReplayEntry.Disposition = .send) -> ReplayResult {
        let entry = ReplayEntry(number: 1, method: "GET", url: "http://h.example/a",
                                recorded: .init(status: recorded.0, size: recorded.1), disposition: disposition)
        return ReplayResult(entry: entry, response: now.map { ReplayResponse(status: $0.0, size: $0.1, failure: failure) })
    }

    @Test("unchanged lines carry no marker; the summary counts; exit 0")
    func unchanged() {
        var report = ReplayReport()
        #expect(report.add(Self.result((200, 15), (200, 15))) == "200       15 B → 200       15 B  GET http://h.example/a")
        #expect(report.summary == "1 request, 0 status changes, 0 failures")
        #expect(report.exitCode == 0)
    }

    @Test("a changed status and size are marked; a failure shows the proxy's words; exit 1")
    func changed() {
        var report = ReplayReport()
        let line = report.add(Self.result((200, 15), (503, 4)))
        #expect(line.hasSuffix("GET http://h.example/a  status changed, size changed"), "\(line)")
        let sizeOnly = report.add(Self.result((200, 15), (200, 16)))
        #expect(sizeOnly.hasSuffix("  size changed"), "\(sizeOnly)")
        let failed = report.add(Self.result((0, -1), (502, 80), failure: "hookproxy: cannot connect to h.example:80: refused"))
        #expect(failed == "---        - B → 502       80 B  GET http://h.example/a  status changed, failed: hookproxy: cannot connect to h.example:80: refused",
                "\(failed)")
        let notSent = report.add(Self.result((200, 3), nil, disposition: .notReplayable("truncated")))
        #expect(notSent == "200        3 B → not sent        GET http://h.example/a  failed: truncated", "\(notSent)")
        let skipped = report.add(Self.result((200, 3), nil, disposition: .skipped("not an http(s) URL")))
        #expect(skipped == "skipped                          GET http://h.example/a  (not an http(s) URL)", "\(skipped)")
        #expect(report.summary == "4 requests, 2 status changes, 2 size changes, 2 failures, 1 skipped")
        #expect(report.exitCode == 1)
    }

    @Test("a failure alone (same status as recorded) still exits 1")
    func failureAlone() {
        var report = ReplayReport()
        _ = report.add(Self.result((502, 60), (502, 60), failure: "hookproxy: DNS failure x: no"))
        #expect(report.summary == "1 request, 0 status changes, 1 failure")
        #expect(report.exitCode == 1)
    }
}
