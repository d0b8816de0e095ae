import FoundationEssentials
import ProxyModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one line per exchange to stdout:
/// `12:34:56.789 200 GET http://example.com/a 1.2 KiB 35 ms [local-api, no-cookies] redirect followed 2 hops`
/// (`h2` after the URL when the client spoke HTTP/2).
///
/// `record` is called on an event-loop thread and only queues; lines are formatted (redacted) and written by one
/// background thread, each exchange in a single `write(2)`, so lines never interleave. The status is coloured per
/// class only when stdout is a terminal. `verbose` adds the request (`  > `) and response (`  < `) header lines,
/// redacted like every output. Text from the traffic has its control characters escaped (`TerminalSafe`), so a
/// server cannot drive the terminal. `--quiet` means: do not create a ConsoleLog.
public final class ConsoleLog: FlowRecorder, @unchecked Sendable {
    private let queue: AsyncRecorder

    /// - Parameters:
    ///   - verbose: `--verbose`: header lines under each exchange line.
    ///   - redactor: `--log-secrets`, `--redact-query`.
    ///   - color: nil (default) colours when stdout is a terminal.
    ///   - fileDescriptor: where lines go (stdout by default).
    public init(verbose: Bool = false, redactor: Redactor = Redactor(), color: Bool? = nil,
                fileDescriptor: Int32 = STDOUT_FILENO) {
        let sink = ConsoleSink(fd: fileDescriptor, verbose: verbose, color: color ?? (isatty(fileDescriptor) == 1))
        queue = AsyncRecorder(name: "console", sink: sink, redactor: redactor)
    }

    public func record(_ flow: FlowRecord) { queue.record(flow) }
    /// Blocks until every exchange recorded before the call is written.
    public func flush() { queue.flush() }
    public func close() { queue.close() }
    /// Records dropped because the queue was full.
    public var droppedCount: Int { queue.dropped }

    /// The exchange line for `flow` as given (apply `Redactor.redact` first: `record` does).
    /// `utc` formats the time in UTC instead of local time (for tests).
    public static func line(for flow: FlowRecord, color: Bool = false, utc: Bool = false) -> String {
        if let session = flow.webSocket, !session.isOpening { return sessionLine(for: flow, session, utc: utc) }
        let status = flow.response.map { String($0.status) } ?? "ERR"
        let head = Timestamp.clock(flow.start, utc: utc) + " "
            + (color ? colored(status, status: flow.response?.status) : status)
        var parts = [flow.request.method]
        parts.append(flow.webSocket?.isWebSocket == true ? webSocketURL(flow.url) : flow.url)
        if flow.request.version.major == 2 { parts.append("h2") }
        parts.append(humanSize(flow.responseBodySize))
        parts.append(humanDuration(flow.durationMs))
        if flow.hop > 0 { parts.append("hop \(flow.hop)") }
        if !flow.rules.isEmpty { parts.append("[" + flow.rules.joined(separator: ", ") + "]") }
        parts.append(contentsOf: flow.events.map(\.logText))
        if let error = flow.error { parts.append("error: \(error)") }
        if let session = flow.webSocket { parts.append(session.protocolName) }
        return head + " " + TerminalSafe.text(parts.joined(separator: " "))
    }

    /// The line at a session's end: `12:34:56.789 websocket closed 1000 ↑3 msgs 1.2 KiB ↓3 msgs 1.2 KiB 4.20 s`
    /// (↑ client to server), with the URL, the closing side and the reason when there is one.
    static func sessionLine(for flow: FlowRecord, _ session: WebSocketLog, utc: Bool) -> String {
        let end = flow.start.addingTimeInterval(flow.durationMs / 1000)
        var parts = [Timestamp.clock(end, utc: utc), session.protocolName, "closed"]
        parts.append(session.close?.code.map(String.init) ?? "-")
        if session.isWebSocket {
            parts.append("↑\(session.sentMessages) msgs \(humanSize(session.sentBytes))")
            parts.append("↓\(session.receivedMessages) msgs \(humanSize(session.receivedBytes))")
        } else {
            parts.append("↑\(humanSize(session.sentBytes)) ↓\(humanSize(session.receivedBytes))")
        }
        parts.append(humanDuration(flow.durationMs))
        parts.append(session.isWebSocket ? webSocketURL(flow.url) : flow.url)
        if let close = session.close {
            parts.append("by \(close.by.rawValue)" + (close.reason.isEmpty ? "" : ": \(close.reason)"))
        }
        parts.append(contentsOf: flow.events.filter { $0.hook == .body }.map(\.logText))
        return TerminalSafe.text(parts.joined(separator: " "))
    }

    /// `ws://` / `wss://` for the console (the files keep the handshake's http(s) URL).
    static func webSocketURL(_ url: String) -> String {
        if url.hasPrefix("https://") { return "wss://" + url.dropFirst(8) }
        if url.hasPrefix("http://") { return "ws://" + url.dropFirst(7) }
        return url
    }

    /// The `--verbose` lines under the exchange line: request headers (`  > `) then response headers (`  < `).
    public static func headerLines(for flow: FlowRecord) -> [String] {
        var lines = flow.request.headers.map { "  > \($0.name): \($0.value)" }
        if let response = flow.response {
            lines.append(contentsOf: response.headers.map { "  < \($0.name): \($0.value)" })
        }
        return lines.map(TerminalSafe.text)
    }

    /// `512 B`, `1.2 KiB`, `3.4 MiB`, `1.0 GiB`.
    public static func humanSize(_ bytes: Int) -> String {
        if bytes < 1024 { return "\(bytes) B" }
        var value = Double(bytes) / 1024
        for unit in ["KiB", "MiB", "GiB"] {
            if value < 1024 || unit == "GiB" { return FixedPoint.text(value, decimals: 1) + " " + unit }
            value /= 1024
        }
        return "\(bytes) B"
    }

    /// `35 ms` below a second, else `1.24 s`.
    public static func humanDuration(_ ms: Double) -> String {
        ms < 1000 ? FixedPoint.text(ms, decimals: 0) + " ms" : FixedPoint.text(ms / 1000, decimals: 2) + " s"
    }

    static func colored(_ text: String, status: Int?) -> String {
        let code: String
        switch status {
        case .some(200..<300): code = "32" // green
        case .some(300..<400): code = "36" // cyan
        case .some(400..<500): code = "33" // yellow
        case .some(100..<200): code = "37"
        default: code = "31" // 5xx and failures: red
        }
        return "\u{1B}[\(code)m\(text)\u{1B}[0m"
    }
}

/// Formats and writes console lines; runs on the ConsoleLog's writer thread only.
final class ConsoleSink: LogSink {
    let fd: Int32
    let verbose: Bool
    let color: Bool

    init(fd: Int32, verbose: Bool, color: Bool) {
        self.fd = fd
        self.verbose = verbose
        self.color = color
    }

    func write(_ flow: FlowRecord) {
        var text = ConsoleLog.line(for: flow, color: color) + "\n"
        if verbose {
            for line in ConsoleLog.headerLines(for: flow) { text += line + "\n" }
        }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 { if errno == EINTR { continue }; return }
            done += n
        }
    }

    func sync() {}
    func close() {}
}
