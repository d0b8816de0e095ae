import Foundation
import ProxyModel

/// Writes one line per exchange to stdout: time, status, method, URL, size, duration, rules, hook events.
public final class ConsoleLog: FlowRecorder, @unchecked Sendable {
    private let lock = NSLock()
    private let verbose: Bool

    public init(verbose: Bool = false) {
        self.verbose = verbose
    }

    public func record(_ flow: FlowRecord) {
        let line = ConsoleLog.line(for: flow)
        lock.lock()
        FileHandle.standardOutput.write((line + "\n").data(using: .utf8)!)
        lock.unlock()
    }

    public static func line(for flow: FlowRecord) -> String {
        let status = flow.response.map { String($0.status) } ?? "---"
        var parts = [status, flow.request.method, flow.url, "\(flow.responseBodySize)B", String(format: "%.0fms", flow.durationMs)]
        if !flow.rules.isEmpty { parts.append("[" + flow.rules.joined(separator: ", ") + "]") }
        parts.append(contentsOf: flow.events.map(\.logText))
        if let error = flow.error { parts.append("error: \(error)") }
        return parts.joined(separator: " ")
    }
}
