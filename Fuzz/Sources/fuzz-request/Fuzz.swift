// The client request path, without network: the fuzz input is the bytes a client writes on one connection.
// They go through the server's own HTTP/1 pipeline set-up (NIO's HTTPRequestDecoder with hookproxy's header
// limits, pipelining assistance, response encoder) on an EmbeddedChannel; a stand-in for ProxyRequestHandler then
// does what the real one does up to the upstream call, for every request on the connection:
//   - `--proxy-auth` check (`ProxyAuth.matches`), CONNECT target parsing and the intercept/trust decisions;
//   - `RequestClassifier.classify` (absolute-form, origin-form with Host, hookproxy's own address, invalid), on a
//     plain connection and as an intercepted TLS tunnel (implied `https` and authority);
//   - `RuleSet.plan(for:)` with the example rules of rules/ and the fuzz rules below, the local answer, or the
//     upstream head the exchange builds (Expect removed, `plan.editRequest`), the curl URL/target/header lines
//     and body framing, the request body transform on the captured body;
//   - the log record of the exchange, redacted, as HAR entry and JSONL line (which must parse back as JSON).
// Then it answers (local response or a stand-in 200) so the pipelining handler releases the next request.
import Foundation
import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import ProxyLog
import ProxyModel
@testable import ProxyRules
@testable import ProxyServer
import ProxyUpstream

/// Rules that make every kind of plan happen for the requests fuzzing is likely to produce.
let fuzzRules = #"""
rules:
  - name: fuzz-map
    match: { host: "*.example.com", path_regex: "^/api/(v[0-9]+)/(.*)$" }
    map_remote: { to: "http://127.0.0.1:9000/{scheme}/$1/$2?{query}" }
    request:
      set_headers: { X-Fuzz: "1", Host: "mapped.example.test" }
      remove_headers: [Cookie]
      body: { json: { set: { "password": "***", "a.b[0]": 1 } } }
  - name: fuzz-map-host
    match: { host: "map.example.com" }
    map_remote: { to: "https://{host}:8443" }
  - name: fuzz-respond
    match: { path: "/mock/*", method: [GET, POST] }
    respond: { status: 200, headers: { Content-Type: "application/json" }, body: '{"ok":true}' }
    response: { set_headers: { X-Mock: "1" } }
  - name: fuzz-redirect
    match: { path: "/go*", query: { to: "*" } }
    redirect_client: { status: 302, location: "{url}&from=$0" }
  - name: fuzz-header
    match: { header: { X-Debug: "?*" } }
    request: { set_headers: { X-Debugged: "yes" }, body: { replace: [ { text: "secret", with: "xxxxxx" } ] } }
    delay_ms: 1
  - name: fuzz-intercept
    match: { host: "*.intercept.test" }
    intercept: true
"""#

let ruleSet: RuleSet = {
    let dir = NSTemporaryDirectory() + "hookproxy-fuzz-request-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let file = dir + "/zz-fuzz.yaml"
    _ = FileManager.default.createFile(atPath: file, contents: Data(fuzzRules.utf8))
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let repoRules = ProcessInfo.processInfo.environment["HOOKPROXY_RULES_DIR"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("rules").path
    let env = ["HOOKPROXY_EXAMPLE_PASSWORD": "example-password"]
    do throws(RuleLoadFailure) {
        return try RuleLoader.load(paths: [repoRules, file], environment: env)
    } catch {
        FileHandle.standardError.write(Data("fuzz-request: rules/ did not load (\(error)); using the fuzz rules only\n".utf8))
        do throws(RuleLoadFailure) { return try RuleLoader.load(paths: [file], environment: env) } catch { fuzzFail("fuzz rules: \(error)") }
    }
}()

let credentials = ProxyCredentials(user: "user", password: "pass")
let listening = (host: "127.0.0.1", port: 8080)
let captureLimit = 64 * 1024

/// The curl header lines `CurlTransfer.headerLines()` makes of the upstream head.
func curlHeaderLines(_ head: RequestHead) -> [String] {
    var lines: [String] = []
    for field in head.headers where !field.name.caseInsensitiveEquals("content-length") {
        lines.append(field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
    }
    if !head.headers.contains("accept") { lines.append("Accept:") }
    if !head.headers.contains("expect") { lines.append("Expect:") }
    return lines
}

/// The framing the exchange gives the upstream request (`RequestFraming`, as the exchange reads it), after the
/// refusals the handler makes first.
func framing(_ nioHead: HTTPRequestHead, method: String) -> UpstreamRequest.Body {
    _ = RequestFraming.refusal(nioHead)
    return RequestFraming.body(of: nioHead, method: method)
}

/// Logs a record the way the writers do: redact, then encode; the JSON must parse back.
func log(_ flow: FlowRecord) {
    let redacted = Redactor(redactQuery: ["token"]).redact(flow)
    for (json, what) in [(HARWriter.entryJSON(for: redacted), "HAR entry"), (JSONLWriter.line(for: redacted), "JSONL line")] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)), object is [String: Any] else {
            fuzzFail("\(what) is not a JSON object: \(json.prefix(2000))")
        }
    }
    _ = ConsoleLog.line(for: redacted, utc: true)
}

/// Stands in for ProxyRequestHandler: everything up to the upstream engine.
final class RequestPath: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let impliedScheme: String
    let impliedAuthority: String?
    var head: HTTPRequestHead?
    var body: [UInt8] = []
    var bodySize = 0
    var done = false

    init(impliedScheme: String, impliedAuthority: String?) {
        self.impliedScheme = impliedScheme
        self.impliedAuthority = impliedAuthority
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            bodySize = 0
        case .body(let buffer):
            bodySize += buffer.readableBytes
            body.append(contentsOf: buffer.readableBytesView.prefix(max(0, captureLimit - body.count)))
        case .end:
            guard let head else { return }
            self.head = nil
            let response = handle(head)
            answer(response, to: head, context: context)
        }
    }

    func answer(_ response: LocalResponse, to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let keepAlive = head.isKeepAlive && head.method != .CONNECT
        var responseHead = response.head
        if !keepAlive { responseHead.headers.set("Connection", "close") }
        context.write(wrapOutboundOut(.head(responseHead.nioHead(version: head.version))), promise: nil)
        if head.method != .HEAD, !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if !keepAlive { done = true }
    }

    func handle(_ nioHead: HTTPRequestHead) -> LocalResponse {
        let request = RequestContext(head: nioHead, client: "127.0.0.1:50000", start: Date())
        if let header = nioHead.headers.first(name: "proxy-authorization") { _ = ProxyAuth.matches(header, credentials) }
        if nioHead.method == .CONNECT { return connect(request) }
        switch RequestClassifier.classify(nioHead, impliedScheme: impliedScheme, impliedAuthority: impliedAuthority,
                                          listening: listening) {
        case .invalid(let message):
            return local(.text(400, "hookproxy: bad request: \(message)\n"), request: request, events: [])
        case .loop:
            return local(.text(508, "hookproxy: loop detected\n"), request: request, events: [])
        case .misdirected(let message):
            return local(.text(421, "hookproxy: misdirected request: \(message)\n"), request: request, events: [])
        case .ownAddress(let path):
            return local(.text(200, "hookproxy page for \(path)\n", contentType: "text/html; charset=utf-8"),
                         request: request, events: [])
        case .forward(let clientHead):
            // `TE: trailers` alone is kept on purpose (HopByHop: gRPC servers send trailers only to clients that say so).
            if clientHead.headers.contains(where: { ["connection", "transfer-encoding", "upgrade", "proxy-authorization"].contains($0.name.lowercased())
                    || ($0.name.lowercased() == "te" && $0.value != "trailers") }) {
                fuzzFail("hop-by-hop header left in the forwarded head: \(clientHead.headers)")
            }
            return forward(clientHead, nioHead: nioHead, request: request)
        }
    }

    /// ConnectTunnel.open up to the connection attempt.
    func connect(_ request: RequestContext) -> LocalResponse {
        let target = request.head.uri
        guard let (host, port) = ProxyURL.splitAuthority(Substring(target), defaultPort: 443),
              target.contains(":") || target.hasPrefix("[") else {
            return local(.text(400, "hookproxy: bad request: CONNECT target must be host:port, got '\(target.prefix(200))'\n"),
                         request: request, events: [])
        }
        _ = ruleSet.intercept(host: host, port: port)
        _ = ruleSet.plan(for: RequestHead(method: "GET", url: ProxyURL(scheme: "https", host: host, port: port))).trust
        return LocalResponse(head: ResponseHead(status: 200, reason: "Connection Established"), body: [])
    }

    func local(_ response: LocalResponse, request: RequestContext, events: [HookEvent]) -> LocalResponse {
        var request = request
        request.requestBodySize = bodySize
        request.requestBody = CapturedBody(bytes: body, truncated: bodySize > body.count)
        log(request.record(id: 1, response: response.head, bodySize: response.body.count, events: events,
                           responseBody: CapturedBody(bytes: response.body)))
        return response
    }

    func forward(_ clientHead: RequestHead, nioHead: HTTPRequestHead, request: RequestContext) -> LocalResponse {
        var plan = ruleSet.plan(for: clientHead)
        if impliedAuthority != nil { plan.events.insert(HookEvent(hook: .intercept, action: "intercepted"), at: 0) }
        if let local = plan.localResponse {
            return self.local(local, request: request.with(clientHead: clientHead, plan: plan), events: plan.events)
        }
        // Exchange.init
        var upstreamHead = clientHead
        upstreamHead.headers.remove("Expect")
        plan.editRequest(&upstreamHead)
        // CurlTransfer.configure: what curl is given. The URL curl parses must name the host and port the rules
        // matched (or map_remote chose), else a rule for one host would send the request to another.
        let curlURL = "\(upstreamHead.url.scheme)://\(upstreamHead.url.authority)/"
        guard let reparsed = ProxyURL(string: curlURL), reparsed.scheme == upstreamHead.url.scheme,
              reparsed.host == upstreamHead.url.host, reparsed.port == upstreamHead.url.port else {
            fuzzFail("curl URL \(String(reflecting: curlURL)) does not name host \(String(reflecting: upstreamHead.url.host)) port \(upstreamHead.url.port)")
        }
        _ = upstreamHead.url.pathAndQuery
        _ = upstreamHead.url.description
        _ = curlHeaderLines(upstreamHead)
        let body = framing(nioHead, method: clientHead.method)
        if let transform = plan.requestBodyTransform, body != .none {
            var headers = upstreamHead.headers
            let (transformed, _) = transform.apply(to: self.body, headers: &headers)
            upstreamHead.headers = headers
            upstreamHead.headers.remove("Transfer-Encoding")
            upstreamHead.headers.set("Content-Length", String(transformed.count))
        }
        var response = ResponseHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
        HopByHop.strip(&response.headers)
        plan.editResponse(&response)
        log(FlowRecord(
            id: 1, start: request.start, client: request.client, request: upstreamHead, url: clientHead.url.description,
            upstreamURL: upstreamHead.url.description, response: response, requestBodySize: bodySize,
            responseBodySize: 2, requestBody: CapturedBody(bytes: self.body, truncated: bodySize > self.body.count),
            responseBody: CapturedBody(bytes: Array("ok".utf8)), durationMs: 1, rules: plan.firedRules,
            events: plan.events))
        return LocalResponse(head: response, body: Array("ok".utf8))
    }
}

func run(_ bytes: [UInt8], impliedScheme: String, impliedAuthority: String?) {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
    var limits = NIOHTTPDecoderLimitConfiguration()
    limits.maxHeaderListSize = 64 * 1024
    limits.maxHeaderFieldSize = 64 * 1024
    do {
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: true, withErrorHandling: false, withOutboundHeaderValidation: false,
            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: limits)
        try channel.pipeline.syncOperations.addHandler(RequestPath(impliedScheme: impliedScheme, impliedAuthority: impliedAuthority))
    } catch {
        fuzzFail("pipeline set-up: \(error)")
    }
    // in a few writes, as a socket would deliver them
    var offset = 0
    var chunk = max(1, bytes.count / 3)
    while offset < bytes.count {
        let end = min(bytes.count, offset + chunk)
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes[offset..<end]))
        } catch {
            return  // a parser error: ProtocolErrorHandler answers 400/431 and closes
        }
        while let _ = try? channel.readOutbound(as: ByteBuffer.self) {}
        offset = end
        chunk = max(1, chunk * 2)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    run(bytes, impliedScheme: "http", impliedAuthority: nil)
    run(bytes, impliedScheme: "https", impliedAuthority: "secure.intercept.test:443")
    return 0
}

@_cdecl("fuzz_request_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
