// The log encoders: a FlowRecord built from the fuzz input goes through what the writers do with it —
// `Redactor.redact` (as AsyncRecorder does before any sink), the HAR entry, the JSONL line and the console
// lines — and every JSON output must parse back with JSONSerialization as one object (the JSONL line without a
// raw newline). An encoding failure, which the writers would turn into `{}`, is a failure too.
//
// Input: directive lines up to the first empty line, then the request body, a `\n--\n` separator and the response
// body (bodies are raw bytes). Directives (one per line; unknown lines are ignored):
//   M method | U url as the client sent it | P upstream url | C client | V major.minor (request version)
//   S status reason (there is a response) | W major.minor (response version) | > Name: value (request header)
//   < Name: value (response header) | R rule | E hook action|detail | X error | Q redacted query name
//   K secret value | L (--log-secrets) | T flags (q: request body truncated, r: response body truncated)
//   N id reqsize ressize duration dns connect tls firstbyte total (numbers; `-` for none) | H hop
//   I server ip | J connection id | A start (seconds since 1970)
import Foundation
import FuzzSupport
@testable import ProxyLog
import ProxyModel

struct Built {
    var flow: FlowRecord
    var redactor: Redactor
}

/// A finite, plausible number (curl's timings and sizes never reach the extremes the encoders cannot write).
func number(_ text: Substring?, limit: Double = 1e12) -> Double? {
    guard let text, let value = Double(text), value.isFinite else { return nil }
    return max(-limit, min(limit, value))
}

func version(_ text: String) -> HTTPVersionNumber {
    let parts = text.split(separator: ".", maxSplits: 1)
    return HTTPVersionNumber(major: Int(number(parts.first, limit: 1e6) ?? 1), minor: Int(number(parts.dropFirst().first, limit: 1e6) ?? 1))
}

func header(_ text: String) -> (String, String) {
    guard let colon = text.firstIndex(of: ":") else { return (text, "") }
    return (String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingSpaces())
}

func build(_ bytes: [UInt8]) -> Built {
    var input = FuzzInput(bytes)
    var method = "GET", url = "http://example.com/", upstream: String? = nil, client = "127.0.0.1:50000"
    var requestVersion = HTTPVersionNumber.http1_1, responseVersion = HTTPVersionNumber.http1_1
    var status: (Int, String)? = nil
    var requestHeaders = HeaderFields(), responseHeaders = HeaderFields()
    var rules: [String] = [], events: [HookEvent] = [], error: String? = nil
    var redactQuery: [String] = [], secrets: [String] = [], logSecrets = false
    var truncated = (request: false, response: false)
    var numbers: [Double?] = []
    var hop = 0, serverIP: String? = nil, connectionID: String? = nil, start = Date(timeIntervalSince1970: 1_700_000_000)
    while !input.isEmpty {
        let line = input.string()
        if line.isEmpty { break }
        let key = line.first!
        let value = String(line.dropFirst().drop(while: { $0 == " " }))
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
    let bodies = input.rest()
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
    return Built(flow: flow, redactor: Redactor(logSecrets: logSecrets, redactQuery: redactQuery))
}

@discardableResult
func mustBeJSONObject(_ text: String, _ what: String) -> [String: Any] {
    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        fuzzFail("\(what) is not a JSON object: \(text.prefix(2000))")
    }
    return object
}

/// The body a JSONL line carries must give back the captured bytes: exactly, or (truncated capture) without at most
/// the last three bytes of a cut UTF-8 sequence.
func checkBody(_ line: [String: Any], _ key: String, _ captured: CapturedBody?) {
    guard let captured else { return }
    guard let text = line[key] as? String, let encoding = line[key + "_encoding"] as? String else {
        if line[key] is NSNull && captured.bytes.isEmpty { return }
        fuzzFail("\(key) missing for a captured body of \(captured.bytes.count) bytes")
    }
    let logged: [UInt8]
    switch encoding {
    case "utf8": logged = Array(text.utf8)
    case "base64":
        guard let data = Data(base64Encoded: text) else { fuzzFail("\(key) is not base64") }
        logged = Array(data)
    default: fuzzFail("\(key)_encoding is \(encoding)")
    }
    let exact = logged == captured.bytes
    let cut = captured.truncated && captured.bytes.count - logged.count <= 3 && captured.bytes.starts(with: logged)
    if !(exact || cut) {
        fuzzFail("\(key) logs \(logged.count) bytes \(logged.prefix(64)) for captured \(captured.bytes.count) bytes \(captured.bytes.prefix(64)) (truncated: \(captured.truncated))")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let built = build(Array(UnsafeBufferPointer(start: data, count: size)))
    let flow = built.redactor.redact(built.flow)

    // what HARFile and JSONLSink encode (they log the error and write nothing when this throws)
    let encoder = JSONEncoder.logLine()
    do { _ = try encoder.encode(HAREntry(flow)) } catch { fuzzFail("HAR entry does not encode: \(error)") }
    do { _ = try encoder.encode(JSONLRecord(flow)) } catch { fuzzFail("JSONL record does not encode: \(error)") }

    let har = HARWriter.entryJSON(for: flow)
    mustBeJSONObject(har, "HAR entry")
    let line = JSONLWriter.line(for: flow)
    if line.utf8.contains(UInt8(ascii: "\n")) { fuzzFail("JSONL line holds a newline: \(line.prefix(2000))") }
    let object = mustBeJSONObject(line, "JSONL line")
    checkBody(object, "request_body", flow.requestBody)
    checkBody(object, "response_body", flow.responseBody)

    _ = ConsoleLog.line(for: flow, color: true, utc: true)
    _ = ConsoleLog.headerLines(for: flow)
    _ = built.redactor.url(built.flow.url)
    return 0
}

@_cdecl("fuzz_logs_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
