import Testing
import Foundation
import ProxyTestSupport
import ProxyModel

/// FlowRecords as the server builds them, one of each kind the log must handle.
enum Samples {
    static let start = Date(timeIntervalSince1970: 1_700_000_000.123)
    static let credentialHeader = "Basic YWxpY2U6czNjcjN0"   // alice:s3cr3t, added by an on_challenge rule
    static let password = "s3cr3t"
    static let binary: [UInt8] = Array(0...255) + [0, 0xFF, 0xC3]
    static let truncatedBytes = [UInt8](repeating: UInt8(ascii: "a"), count: 1024)

    static func head(_ method: String, _ url: String, _ headers: HeaderFields = []) -> RequestHead {
        RequestHead(method: method, url: ProxyURL(string: url)!, headers: headers)
    }

    /// Plain GET with secrets in headers and a query token.
    static var plain: FlowRecord {
        let url = "http://api.example.com/v1/users?token=abc123&page=2"
        return FlowRecord(
            id: 1, start: start, client: "127.0.0.1:50001",
            request: head("GET", url, [("Host", "api.example.com"), ("Authorization", "Bearer client-token"),
                                       ("Cookie", "sid=cookie-value; theme=dark"), ("Accept", "*/*"),
                                       ("X-Dup", "one"), ("X-Dup", "two")]),
            url: url, upstreamURL: "http://127.0.0.1:9000/v1/users?token=abc123&page=2",
            response: ResponseHead(status: 200, headers: [("Content-Type", "application/json; charset=utf-8"),
                                                          ("Set-Cookie", "sid=new-cookie; Path=/; HttpOnly"),
                                                          ("Content-Length", "17")]),
            requestBodySize: 0, responseBodySize: 17, responseBody: CapturedBody(bytes: Array(#"{"users":["ann"]}"#.utf8)),
            timings: Timings(dns: 1.5, connect: 2.25, tls: nil, firstByte: 10, total: 12.5), durationMs: 13.2,
            rules: ["local-api", "no-cookies"], events: [HookEvent(hook: .rule, action: "mapped", detail: "→ http://127.0.0.1:9000/v1/users")],
            serverIP: "127.0.0.1", connectionID: "7")
    }

    /// A POST that failed before any response.
    static var failed: FlowRecord {
        let url = "http://down.example.invalid/submit"
        return FlowRecord(
            id: 2, start: start.addingTimeInterval(1), client: "127.0.0.1:50002",
            request: head("POST", url, [("Content-Type", "application/json")]), url: url, upstreamURL: url,
            requestBodySize: 11, requestBody: CapturedBody(bytes: Array(#"{"a":"b c"}"#.utf8)),
            durationMs: 3, events: [HookEvent(hook: .upstream, action: "refused")],
            error: "hookproxy: upstream refused down.example.invalid: Could not resolve host")
    }

    /// A followed redirect: three hops, the last one carries the summary event.
    static var redirectChain: [FlowRecord] {
        let urls = ["http://a.example.com/start", "http://a.example.com/next", "https://b.example.com/final"]
        return (0..<3).map { hop in
            let last = hop == 2
            return FlowRecord(
                id: 3 + hop, start: start.addingTimeInterval(2 + Double(hop) / 10), client: "127.0.0.1:50003",
                request: head("GET", urls[hop]), url: urls[hop], upstreamURL: urls[hop],
                response: last ? ResponseHead(status: 200, headers: [("Content-Type", "text/plain")])
                               : ResponseHead(status: hop == 0 ? 302 : 301, headers: [("Location", urls[hop + 1])]),
                responseBodySize: last ? 4 : 0, responseBody: last ? CapturedBody(bytes: Array("done".utf8)) : nil,
                timings: Timings(dns: 0.5, connect: 1, tls: last ? 4 : nil, firstByte: 8, total: 9), durationMs: 9,
                rules: ["follow-redirects"],
                events: last ? [HookEvent(hook: .redirect, action: "redirect followed 2 hops")] : [],
                hop: hop)
        }
    }

    /// A 401 answered with a credential hookproxy added; the server echoes the password in its body.
    static var challenged: FlowRecord {
        let url = "https://intranet.example.com/report"
        return FlowRecord(
            id: 6, start: start.addingTimeInterval(3), client: "127.0.0.1:50004",
            request: head("GET", url, [("Authorization", credentialHeader)]), url: url, upstreamURL: url,
            response: ResponseHead(status: 200, headers: [("Content-Type", "text/plain")]),
            responseBodySize: 20, responseBody: CapturedBody(bytes: Array("you said: \(password)!".utf8)),
            durationMs: 40, rules: ["intranet"],
            events: [HookEvent(hook: .challenge, action: "challenge answered basic")],
            secretValues: [credentialHeader, password])
    }

    /// A binary response body.
    static var binaryBody: FlowRecord {
        let url = "http://img.example.com/logo.png"
        return FlowRecord(
            id: 7, start: start.addingTimeInterval(4), client: "127.0.0.1:50005", request: head("GET", url),
            url: url, upstreamURL: url,
            response: ResponseHead(status: 200, headers: [("Content-Type", "image/png")]),
            responseBodySize: binary.count, responseBody: CapturedBody(bytes: binary), durationMs: 5)
    }

    /// A body over the capture limit.
    static var truncatedBody: FlowRecord {
        let url = "http://big.example.com/log.txt"
        return FlowRecord(
            id: 8, start: start.addingTimeInterval(5), client: "127.0.0.1:50006",
            request: head("PUT", url, [("Content-Type", "text/plain")]), url: url, upstreamURL: url,
            response: ResponseHead(status: 201, headers: [("Content-Type", "text/plain")]),
            requestBodySize: 5000, responseBodySize: 5000,
            requestBody: CapturedBody(bytes: truncatedBytes, truncated: true),
            responseBody: CapturedBody(bytes: truncatedBytes, truncated: true), durationMs: 1500)
    }

    /// A trust rejection: no request byte was sent.
    static var trustRejected: FlowRecord {
        let url = "https://pinned.example.com/"
        return FlowRecord(
            id: 9, start: start.addingTimeInterval(6), client: "127.0.0.1:50007", request: head("GET", url),
            url: url, upstreamURL: url, durationMs: 20, rules: ["pin-api"],
            events: [HookEvent(hook: .trust, action: "trust rejected", detail: "no pin matched")],
            error: "hookproxy: trust rejected pinned.example.com: no pin matched")
    }

    static var all: [FlowRecord] {
        [plain, failed] + redirectChain + [challenged, binaryBody, truncatedBody, trustRejected]
    }
}

/// Temporary files and the helpers the tests share.
enum TestFiles {
    static func directory() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("hookproxy-log-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static var repoRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The venv python `make pydeps` prepares.
    static var python: String { repoRoot.appendingPathComponent(".build/pyvenv/bin/python3").path }

    static func json(_ path: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func entries(_ path: String) throws -> [[String: Any]] {
        let log = try #require(try json(path)["log"] as? [String: Any])
        return try #require(log["entries"] as? [[String: Any]])
    }

    /// Runs a program; returns its exit status, stdout and stderr.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil)
        throws -> (Int32, String, String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = readAllRetryingInterrupts(out.fileHandleForReading)
        let errData = readAllRetryingInterrupts(err.fileHandleForReading)
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }
}

/// read(2) until end of file, retrying on EINTR (Foundation's readDataToEndOfFile aborts on it).
func readAllRetryingInterrupts(_ handle: FileHandle) -> Data {
    var result = Data()
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
        if count > 0 { result.append(contentsOf: buffer[0..<count]); continue }
        if count < 0 && errno == EINTR { continue }
        return result
    }
}
