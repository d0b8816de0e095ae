// The upstream response head: the fuzz input is what curl's CURLOPT_HEADERFUNCTION would hand over, one line per
// call (split after each `\n`, terminators kept). The lines go through `ResponseHeadParser` as
// `CurlTransfer.onHeaderLine` feeds it (once plainly, once holding 401/407 heads for an auth round), and the
// delivered head goes where the exchange takes it: hop-by-hop stripping, the rules' response edits, NIO's
// `HTTPResponseHead` and response encoder (the bytes the client gets), the `on_redirect` Location handling
// (`RedirectFollower.resolve`, `.rewrite`, `.next`), and the request that a followed redirect would send.
import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ProxyModel
@testable import ProxyRules
@testable import ProxyServer
@testable import ProxyUpstream

let request = RequestHead(
    method: "POST", url: ProxyURL(string: "https://api.example.test:8443/v1/users/42?page=2")!,
    headers: [("Host", "api.example.test:8443"), ("Authorization", "Bearer t"), ("Cookie", "a=b"),
              ("Content-Type", "application/json"), ("Content-Length", "2")])

let plan: FlowPlan = {
    var plan = FlowPlan(upstreamURL: request.url)
    plan.responseEdits = [HeaderEdit(set: [HeaderField(name: "X-Edited", value: "1")], remove: ["Server", "set-cookie"]),
                          HeaderEdit(status: nil)]
    return plan
}()

let rewrite = RedirectPolicy.Rewrite(from: "https://api.example.test:8443/", to: "http://127.0.0.1:9000/")

/// What the exchange does with the head it is handed.
func deliver(_ head: ResponseHead) {
    for method in ["GET", "HEAD", "POST", "CONNECT"] { _ = ResponseHead.hasBody(status: head.status, requestMethod: method) }
    _ = ResponseHead.standardReason(for: head.status)

    // on_redirect
    if (300..<400).contains(head.status), let location = head.headers["location"] {
        _ = RedirectFollower.resolve(location, against: request.url)
        _ = RedirectFollower.rewrite(location, against: request.url, with: rewrite)
        for sameHostOnly in [false, true] {
            var follower = RedirectFollower(policy: RedirectPolicy(rule: "fuzz", action: .follow, maxHops: 3, sameHostOnly: sameHostOnly),
                                            original: request)
            if case .follow(let next, _) = follower.next(after: request, status: head.status, location: location) {
                _ = next.url.description
                _ = follower.next(after: next, status: head.status, location: location)
            }
        }
    }
    _ = head.headers[head.status == 401 ? "WWW-Authenticate" : "Proxy-Authenticate"]

    // Exchange.writeHead: strip, edit, hand to NIO, encode for the client
    var out = head
    HopByHop.strip(&out.headers)
    plan.editResponse(&out)
    for (version, method) in [(HTTPVersion.http1_1, HTTPMethod.GET), (.http1_0, .HEAD)] {
        let channel = EmbeddedChannel()
        do {
            try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
            try channel.writeOutbound(HTTPServerResponsePart.head(out.nioHead(version: version)))
            if method != .HEAD { try channel.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: "body")))) }
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
            while let _ = try channel.readOutbound(as: ByteBuffer.self) {}
            _ = try channel.finish()
        } catch {
            _ = try? channel.finish()
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let lines = splitLinesKeepingTerminators(Array(UnsafeBufferPointer(start: data, count: size)))
    for holdsAuthRounds in [false, true] {
        var parser = ResponseHeadParser()
        var delivered: [ResponseHead] = []
        for line in lines {
            let ended = line.withUnsafeBytes { parser.feed($0) }
            let status = parser.current?.status ?? 0
            if ended, !(holdsAuthRounds && (status == 401 || status == 407)), let head = parser.takeForDelivery() {
                delivered.append(head)
            }
        }
        // the body's first bytes (or the transfer's end) deliver whatever arrived
        if let head = parser.takeForDelivery() { delivered.append(head) }
        if delivered.count > 1 { fuzzFail("ResponseHeadParser delivered \(delivered.count) heads for one transfer") }
        _ = parser.answeredChallenges
        // known: a negative status traps in ResponseHead.nioHead (HTTPConversions.swift), see README.md
        if skipKnownCrashes && delivered.contains(where: { $0.status < 0 }) { continue }
        delivered.forEach(deliver)
    }
    return 0
}

@_cdecl("fuzz_response_head_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
