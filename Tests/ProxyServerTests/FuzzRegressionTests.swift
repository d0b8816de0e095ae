import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ProxyLog
import ProxyModel
import ProxyRules
import Testing
@testable import ProxyServer
@testable import ProxyUpstream

/// Tests of crashes not fixed yet are disabled; `HOOKPROXY_FUZZ_CRASHES=1` runs them anyway (to check a fix, or
/// that they still reproduce).
let knownCrashesSkipped = ProcessInfo.processInfo.environment["HOOKPROXY_FUZZ_CRASHES"] != "1"

/// Inputs the fuzz targets of Fuzz/ (`make fuzz`) crashed on, kept in Fuzz/regressions/, fed through the same path
/// as the target that found them.
@Suite struct FuzzRegressionTests {
    static let regressions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/regressions")

    static func input(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: regressions.appendingPathComponent(path)))
    }

    // MARK: fuzz-response-head

    /// What `fuzz-response-head` does: the lines (split after each `\n`) through `ResponseHeadParser` as
    /// `UpstreamTransfer.onHeaderLine` feeds it, then the delivered head as `Exchange.writeHead` hands it to NIO
    /// (strip hop-by-hop, `nioHead`, the response encoder).
    static func deliverResponseHead(_ bytes: [UInt8]) throws {
        var parser = ResponseHeadParser()
        var delivered: [ResponseHead] = []
        var start = 0
        var lines: [[UInt8]] = []
        for (index, byte) in bytes.enumerated() where byte == 0x0A {
            lines.append(Array(bytes[start...index]))
            start = index + 1
        }
        if start < bytes.count { lines.append(Array(bytes[start...])) }
        for line in lines {
            if line.withUnsafeBytes({ parser.feed($0) }), let head = parser.takeForDelivery() { delivered.append(head) }
        }
        if let head = parser.takeForDelivery() { delivered.append(head) }
        #expect(delivered.count == 1)
        for head in delivered {
            var out = head
            HopByHop.strip(&out.headers, in: .response)
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
            try channel.writeOutbound(HTTPServerResponsePart.head(out.nioHead(version: .http1_1)))
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
            _ = try channel.finish()
        }
    }

    /// `HTTP/ -1`: a negative status code. The parser keeps -1; `ResponseHead.nioHead` hands it to NIO's
    /// `HTTPResponseStatus(statusCode:)`, which traps converting it to `UInt`.
    @Test func negativeStatus() throws {
        try Self.deliverResponseHead(try Self.input("fuzz-response-head/negative-status.txt"))
    }

    /// `HTTP/2 -1 Neg`: the form libcurl 7.88 passes on (it refuses negative codes only in `HTTP/1.x` status lines)
    /// and completes the transfer with; any upstream server can send it.
    @Test func negativeStatusHTTP2Line() throws {
        try Self.deliverResponseHead(try Self.input("fuzz-response-head/http2-negative-status.txt"))
    }

    // MARK: fuzz-request

    /// What `fuzz-request` does up to the log, for the connection's first request: hookproxy's HTTP/1 server pipeline
    /// on an EmbeddedChannel, `RequestClassifier.classify`, and for a request answered locally (here: 400, no Host)
    /// the log record with the captured request body, as HAR entry and JSONL line.
    final class Collector: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        var records: [FlowRecord] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head
            case .body(let buffer): body.append(contentsOf: buffer.readableBytesView)
            case .end:
                guard let head else { return }
                var request = RequestContext(head: head, client: "127.0.0.1:50000", start: Date())
                request.requestBodySize = body.count
                request.requestBody = CapturedBody(bytes: body)
                switch RequestClassifier.classify(head, impliedScheme: "http", impliedAuthority: nil, listening: ("127.0.0.1", 8080)) {
                case .invalid(let message):
                    let answer = LocalResponse.text(400, "hookproxy: bad request: \(message)\n")
                    records.append(request.record(id: 1, response: answer.head, bodySize: answer.body.count, events: []))
                case .ownAddress, .forward, .loop, .misdirected:
                    break
                }
            }
        }
    }

    /// `POST /` with an empty `Content-Type:` and a body: crashed in `BodyText.kind(of:)` (`split(";")[0]` on a
    /// value without a media type) at 3f45387; fixed since.
    @Test func emptyContentTypeWithBody() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: true, withErrorHandling: false, withOutboundHeaderValidation: false,
            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: .init())
        let collector = Collector()
        try channel.pipeline.syncOperations.addHandler(collector)
        try channel.writeInbound(ByteBuffer(bytes: try Self.input("fuzz-request/empty-content-type-with-body.http")))
        #expect(collector.records.count == 1)
        for flow in collector.records.map({ Redactor().redact($0) }) {
            for json in [HARWriter.entryJSON(for: flow), JSONLWriter.line(for: flow)] {
                #expect(try JSONSerialization.jsonObject(with: Data(json.utf8)) is [String: Any])
            }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}
