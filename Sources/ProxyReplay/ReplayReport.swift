/// The replay's output: one line per entry, then a summary; and the exit status they imply.
///
/// ```
/// 200       15 B → 200       15 B  GET http://127.0.0.1:8000/head-test
/// 200       15 B → 503       12 B  GET http://127.0.0.1:8000/api/user  status changed, size changed
/// 200        0 B → 502       98 B  GET http://gone.example/  status changed, failed: hookproxy: DNS failure gone.example: …
/// 3 requests, 2 status changes, 1 failure
/// ```
public struct ReplayReport: Sendable, Hashable {
    public private(set) var requests = 0
    public private(set) var statusChanges = 0
    public private(set) var sizeChanges = 0
    public private(set) var failures = 0
    public private(set) var skipped = 0

    public init() {}

    /// Counts `result` and returns its line.
    public mutating func add(_ result: ReplayResult) -> String {
        let entry = result.entry
        let recorded = "\(ReplayReport.status(entry.recorded.status)) \(ReplayReport.size(entry.recorded.size))"
        let target = "\(entry.method) \(entry.url)"
        let response: ReplayResponse
        switch entry.disposition {
        case .skipped(let reason):
            skipped += 1
            return "skipped" + String(repeating: " ", count: 26) + "\(target)  (\(reason))"
        case .notReplayable(let reason):
            requests += 1
            failures += 1
            return "\(recorded) → not sent        \(target)  failed: \(reason)"
        case .send:
            requests += 1
            response = result.response ?? ReplayResponse(status: 0, size: 0, failure: "no response")
        }
        var marks: [String] = []
        if response.status != entry.recorded.status {
            statusChanges += 1
            marks.append("status changed")
        }
        if response.failure == nil, entry.recorded.size >= 0, response.size != entry.recorded.size {
            sizeChanges += 1
            marks.append("size changed")
        }
        if let failure = response.failure {
            failures += 1
            marks.append("failed: \(failure)")
        }
        let now = "\(ReplayReport.status(response.status)) \(ReplayReport.size(response.size))"
        return "\(recorded) → \(now)  \(target)" + (marks.isEmpty ? "" : "  " + marks.joined(separator: ", "))
    }

    /// `N requests, M status changes, K failures` (with size changes and skipped entries when there are any).
    public var summary: String {
        var parts = [ReplayReport.count(requests, "request"), ReplayReport.count(statusChanges, "status change")]
        if sizeChanges > 0 { parts.append(ReplayReport.count(sizeChanges, "size change")) }
        parts.append(ReplayReport.count(failures, "failure"))
        if skipped > 0 { parts.append("\(skipped) skipped") }
        return parts.joined(separator: ", ")
    }

    /// 1 when any status changed or any request failed, else 0.
    public var exitCode: Int32 { statusChanges > 0 || failures > 0 ? 1 : 0 }

    static func status(_ status: Int) -> String {
        status == 0 ? "---" : String(status)
    }

    static func size(_ size: Int) -> String {
        let text = size < 0 ? "-" : String(size)
        return String(repeating: " ", count: max(0, 8 - text.count)) + text + " B"
    }

    static func count(_ value: Int, _ noun: String) -> String {
        "\(value) \(noun)\(value == 1 ? "" : "s")"
    }
}
