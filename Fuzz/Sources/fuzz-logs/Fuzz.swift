// The log encoders: a FlowRecord built from the fuzz input goes through what the writers do with it —
// `Redactor.redact` (as AsyncRecorder does before any sink), the HAR entry, the JSONL line and the console
// lines — and every JSON output must parse back with JSONSerialization as one object (the JSONL line without a
// raw newline). The writers encode with JSONWriter, which cannot fail; the Encodable conformances it is held to
// (LogJSONMatchesEncoderTests) must encode with JSONEncoder.logLine() too.
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
import ProxyTestSupport

struct Built {
    var flow: FlowRecord
    var redactor: Redactor
}

/// The record and redactor the input describes (the decoder is shared with `FuzzLogsRegressionTests`).
func build(_ bytes: [UInt8]) -> Built {
    let input = FuzzLogsInput.decode(bytes)
    return Built(flow: input.flow, redactor: Redactor(logSecrets: input.logSecrets, redactQuery: input.redactQuery))
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

    // the reference encoding JSONWriter's output is compared with in LogJSONMatchesEncoderTests
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
