import Foundation
import ProxyModel

/// The input format of the `fuzz-logs` fuzz target, decoded once for the target and for its regression tests
/// (`FuzzLogsRegressionTests`): directive lines up to an empty line, then the request body, `\n--\n`, the response
/// body. The directives are listed in Fuzz/Sources/fuzz-logs/Fuzz.swift.
public enum FuzzLogsInput {
    /// A flow record, and how the redactor that sees it is set (`--log-secrets`, `--redact-query`).
    public struct Decoded {
        public var flow: FlowRecord
        public var logSecrets: Bool
        public var redactQuery: [String]
    }

    static func number(_ text: Substring?, limit: Double = 1e12) -> Double? {
        guard let text, let value = Double(text), value.isFinite else { return nil }
        return max(-limit, min(limit, value))
    }

    static func version(_ text: String) -> HTTPVersionNumber {
        let parts = text.split(separator: ".", maxSplits: 1)
        return HTTPVersionNumber(major: Int(number(parts.first, limit: 1e6) ?? 1),
                                 minor: Int(number(parts.dropFirst().first, limit: 1e6) ?? 1))
    }

    static func header(_ text: String) -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { return (text, "") }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingSpaces())
    }

    public static func decode(_ bytes: [UInt8]) -> Decoded {
        var offset = 0
        func line() -> String {
            let end = bytes[offset...].firstIndex(of: 0x0A) ?? bytes.count
            defer { offset = min(bytes.count, end + 1) }
            return String(decoding: bytes[offset..<end], as: UTF8.self)
        }
        var method = "GET", url = "http://example.com/", upstream: String? = nil, client = "127.0.0.1:50000"
        var requestVersion = HTTPVersionNumber.http1_1, responseVersion = HTTPVersionNumber.http1_1
        var status: (Int, String)? = nil
        var requestHeaders = HeaderFields(), responseHeaders = HeaderFields()
        var rules: [String] = [], events: [HookEvent] = [], error: String? = nil
        var redactQuery: [String] = [], secrets: [String] = [], logSecrets = false
        var truncated = (request: false, response: false)
        var numbers: [Double?] = []
        var hop = 0, serverIP: String? = nil, connectionID: String? = nil
        var start = Date(timeIntervalSince1970: 1_700_000_000)
        while offset < bytes.count {
            let text = line()
            if text.isEmpty { break }
            let key = text.first!
            let value = String(text.dropFirst().drop(while: { $0 == " " }))
            switch key {
            case "M": method = value
            case "U": url = value
            case "P": upstream = value
            case "C": client = value
            case "V": requestVersion = version(value)
            case "W": responseVersion = version(value)
            case "S":
                let parts = value.split(separator: " ", maxSplits: 1)
                status = (Int(number(parts.first, limit: 1e6) ?? 200), parts.count > 1 ? String(parts[1]) : "")
            case ">": let (n, v) = header(value); requestHeaders.add(n, v)
            case "<": let (n, v) = header(value); responseHeaders.add(n, v)
            case "R": rules.append(value)
            case "E":
                let parts = value.split(separator: " ", maxSplits: 1)
                let hook = HookEvent.Hook(rawValue: String(parts.first ?? "")) ?? .rule
                let rest = parts.count > 1 ? parts[1].split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false) : []
                events.append(HookEvent(hook: hook, action: String(rest.first ?? ""), detail: rest.count > 1 ? String(rest[1]) : ""))
            case "X": error = value
            case "Q": redactQuery.append(value)
            case "K": secrets.append(value)
            case "L": logSecrets = true
            case "T": truncated = (value.contains("q"), value.contains("r"))
            case "N": numbers = value.split(separator: " ").map { $0 == "-" ? nil : number($0) }
            case "H": hop = Int(number(Substring(value), limit: 1e6) ?? 0)
            case "I": serverIP = value
            case "J": connectionID = value
            case "A": start = Date(timeIntervalSince1970: number(Substring(value), limit: 4e9) ?? 0)
            default: break
            }
        }
        let bodies = offset < bytes.count ? Array(bytes[offset...]) : []
        let separator = Array("\n--\n".utf8)
        var requestBody = bodies, responseBody: [UInt8] = []
        if let cut = (0..<max(0, bodies.count - separator.count + 1)).first(where: { bodies[$0..<($0 + separator.count)].elementsEqual(separator) }) {
            requestBody = Array(bodies[..<cut])
            responseBody = Array(bodies[(cut + separator.count)...])
        }
        func n(_ i: Int) -> Double? { i < numbers.count ? numbers[i] : nil }
        let parsedURL = ProxyURL(string: url) ?? ProxyURL(scheme: "http", host: "example.com", path: url)
        let flow = FlowRecord(
            id: Int(n(0) ?? 1), start: start, client: client,
            request: RequestHead(method: method, url: parsedURL, version: requestVersion, headers: requestHeaders),
            url: url, upstreamURL: upstream,
            response: status.map { ResponseHead(status: $0.0, reason: $0.1, version: responseVersion, headers: responseHeaders) },
            requestBodySize: Int(n(1) ?? Double(requestBody.count)), responseBodySize: Int(n(2) ?? Double(responseBody.count)),
            requestBody: requestBody.isEmpty && !truncated.request ? nil : CapturedBody(bytes: requestBody, truncated: truncated.request),
            responseBody: responseBody.isEmpty && !truncated.response ? nil : CapturedBody(bytes: responseBody, truncated: truncated.response),
            timings: Timings(dns: n(4), connect: n(5), tls: n(6), firstByte: n(7), total: n(8)),
            durationMs: n(3) ?? 12.5, rules: rules, events: events, error: error, hop: hop,
            serverIP: serverIP, connectionID: connectionID, secretValues: secrets)
        return Decoded(flow: flow, logSecrets: logSecrets, redactQuery: redactQuery)
    }
}
