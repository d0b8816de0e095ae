import Foundation
import ProxyModel
import ProxyTestSupport
import Testing

/// An HTTPS upstream whose close-delimited body ends with a TCP close and no TLS close_notify may have been cut
/// short by anyone on the path (RFC 8446 §6.1, RFC 9112 §9.8): libcurl 7.88 takes such an end for a clean one, and
/// hookproxy handed the client a truncated body as whole. Found by the session-26 review (`t_tls_trunc.py`).
@Suite("HTTPS bodies cut short without close_notify", .timeLimit(.minutes(2)))
struct TLSTruncationTests {
    static let ca = TestCA.shared
    static let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"

    /// The raw answer an HTTP/1.1 client gets for one absolute-form `https` GET through an intercepting proxy
    /// (which trusts the test CA) to an origin playing `script`, and the exchange's log record.
    private func answer(_ script: [MisbehavingOrigin.Step]) async throws -> (String, FlowRecord?) {
        try await MisbehavingOrigin.with(script, tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, _ in
                let answer = try await rawGET("https://localhost:\(origin.port)/t", host: "localhost:\(origin.port)", through: proxy)
                return (answer, await proxy.recorder.waitFor(count: 1).first)
            }
        }
    }

    @Test("a close-delimited body ended without close_notify reaches the client without a clean end, and the log says why")
    func truncatedBody() async throws {
        let (answer, record) = try await answer([
            .text(Self.head + "\r\nhello, "), .pause(milliseconds: 50), .closeWithoutTLSClose,
        ])
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.contains("hello, "), "\(answer)")
        #expect(!answer.hasSuffix("0\r\n\r\n"), "the truncated body got a clean end: \(answer)")
        #expect(record?.error?.contains("closed without close_notify") == true, "\(String(describing: record?.error))")
    }

    @Test("with close_notify, or framed by Content-Length, the same close is a clean end")
    func cleanEnds() async throws {
        let (closed, closedRecord) = try await answer([.text(Self.head + "\r\nhello, world"), .close])
        #expect(closed.hasSuffix("hello, world\r\n0\r\n\r\n"), "\(closed)")
        #expect(closedRecord?.error == nil, "\(String(describing: closedRecord?.error))")
        let (framed, framedRecord) = try await answer([
            .text(Self.head + "Content-Length: 5\r\n\r\nhello"), .pause(milliseconds: 50), .closeWithoutTLSClose,
        ])
        #expect(framed.hasSuffix("\r\n\r\nhello"), "\(framed)")
        #expect(framedRecord?.error == nil, "\(String(describing: framedRecord?.error))")
    }

    @Test("through interception over HTTP/2, curl sees the truncation as an error, not a whole body")
    func curlHTTP2() async throws {
        let script: [MisbehavingOrigin.Step] = [.text(Self.head + "\r\nhello, "), .pause(milliseconds: 50), .closeWithoutTLSClose]
        try await MisbehavingOrigin.with(script, tls: Self.ca.identity([Self.ca.leaf, Self.ca.intermediate])) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let result = try await CurlCLI.run([
                    "-s", "-S", "--http2", "--max-time", "20", "-x", proxy.proxyURL, "--cacert", caPath,
                    "https://localhost:\(origin.port)/t",
                ])
                #expect(result.exitCode != 0, "curl took the truncated body for whole: \(result.stderr)")
                #expect(result.stdoutText == "hello, ", "\(result.stderr)")
            }
        }
    }
}
