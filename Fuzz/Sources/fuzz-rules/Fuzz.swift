// Rule files: the fuzz input is the content of one rule file, loaded by `RuleLoader.load(paths:)` exactly as
// `--rules FILE` / `hookproxy check` loads it (UTF-8 and NUL checks, YAML, every key's parser, error positions).
// A loaded RuleSet is then used the way the server uses it: a plan for requests that match each rule (built from
// the rule's own host/path/method), the request and response edits, both body transforms on small sample bodies,
// and the CONNECT `intercept` decision.
import Foundation
import FuzzSupport
import ProxyModel
@testable import ProxyRules

/// A directory of our own holding the rule file, next to copies of the repository's rules/mocks and rules/certs,
/// so the example rule files (`body_file: mocks/user.json`, `certificates: [certs]`) load as they do in the repo.
let workDirectory: String = {
    let dir = NSTemporaryDirectory() + "hookproxy-fuzz-rules-\(getpid())"
    let manager = FileManager.default
    try? manager.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let repoRules = ProcessInfo.processInfo.environment["HOOKPROXY_RULES_DIR"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("rules").path
    for sub in ["mocks", "certs"] where !manager.fileExists(atPath: dir + "/" + sub) {
        try? manager.copyItem(atPath: repoRules + "/" + sub, toPath: dir + "/" + sub)
    }
    atexit { try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "hookproxy-fuzz-rules-\(getpid())") }
    return dir
}()
let rulePath = workDirectory + "/fuzz.yaml"
let environment = ["HOOKPROXY_EXAMPLE_PASSWORD": "example-password", "HOOKPROXY_FUZZ": "fuzz-value", "HOME": workDirectory]

let jsonBody = Array(#"{"user":{"id":1,"name":"ann","tags":["a","b"]},"items":[1,2,3],"ok":true}"#.utf8)
let textBody = Array("Hello, World! Example Domain maintenance 12345\n".utf8)
/// `{"a":1}` gzip-compressed, so the decode-transform-encode path runs too.
let gzipBody: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xab, 0x56, 0x4a, 0x54, 0xb2,
                         0x32, 0xac, 0x05, 0x00, 0xcc, 0x97, 0x5e, 0x26, 0x07, 0x00, 0x00, 0x00]

/// A concrete string a glob matches (`*` → "x", `?` → "a").
func sample(of glob: Glob?) -> String? {
    glob.map { $0.pattern.replacingOccurrences(of: "*", with: "x").replacingOccurrences(of: "?", with: "a") }
}

/// Requests that reach each rule: its own host, port, scheme, method, path and query/header patterns.
func requests(for set: RuleSet) -> [RequestHead] {
    var heads: [RequestHead] = [
        RequestHead(method: "GET", url: ProxyURL(string: "http://example.com/")!, headers: [("Host", "example.com")]),
        RequestHead(method: "POST", url: ProxyURL(string: "https://api.example.test:8443/v1/users/42?page=2&q=a%20b")!,
                    headers: [("Host", "api.example.test:8443"), ("Content-Type", "application/json"),
                              ("Authorization", "Bearer t"), ("Content-Length", "\(jsonBody.count)")]),
    ]
    for rule in set.rules.prefix(16) {
        let match = rule.match
        let scheme = match.schemes.first ?? "http"
        let host = sample(of: match.hosts.first) ?? "example.com"
        var path = sample(of: match.path) ?? "/v1/users/7"
        if !path.hasPrefix("/") { path = "/" + path }
        let query = match.query.map { "\($0.name)=\(sample(of: $0.value) ?? "")" }.joined(separator: "&")
        var headers: HeaderFields = [("Host", host)]
        for (name, value) in match.headers { headers.add(name, sample(of: value) ?? "") }
        headers.add("Content-Type", "application/json")
        let url = ProxyURL(scheme: scheme, host: host, port: match.ports.first, path: path,
                           query: query.isEmpty ? nil : query)
        heads.append(RequestHead(method: match.methods.first ?? "GET", url: url, headers: headers))
    }
    return heads
}

func exercise(_ set: RuleSet) {
    _ = set.summary
    _ = set.warnings.map(\.description)
    for request in requests(for: set) {
        let plan = set.plan(for: request)
        var upstream = request
        plan.editRequest(&upstream)
        _ = plan.hostFromRules
        _ = upstream.url.description
        if let local = plan.localResponse {
            _ = local.head.headers.count
            continue
        }
        var response = ResponseHead(status: 200, headers: [("Content-Type", "application/json"),
                                                           ("Content-Length", "\(jsonBody.count)")])
        plan.editResponse(&response)
        for transform in [plan.requestBodyTransform, plan.responseBodyTransform].compactMap({ $0 }) {
            var headers: HeaderFields = [("Content-Type", "application/json")]
            _ = transform.apply(to: jsonBody, headers: &headers)
            var textHeaders: HeaderFields = [("Content-Type", "text/plain")]
            _ = transform.apply(to: textBody, headers: &textHeaders)
            var gzipHeaders: HeaderFields = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
            _ = transform.apply(to: gzipBody, headers: &gzipHeaders)
        }
        _ = set.intercept(host: request.url.host, port: request.url.port)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    guard FileManager.default.createFile(atPath: rulePath, contents: bytes) else { fuzzFail("cannot write \(rulePath)") }
    do throws(RuleLoadFailure) {
        let set = try RuleLoader.load(paths: [rulePath], environment: environment)
        exercise(set)
    } catch {
        if error.errors.isEmpty { fuzzFail("a failed load reported no error") }
        _ = error.description
        _ = error.warnings.map(\.description)
    }
    return 0
}

@_cdecl("fuzz_rules_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
