import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Hostile HTTP/1.1 clients and their request bodies: what reaches the upstream must be the message hookproxy's
/// parser read, or nothing (a 400 to the client); a connection the client ends gets no answer it did not ask for.
/// Upstreams are `MisbehavingOrigin`s, which record every byte they receive; clients are `RawClient`s.
@Suite("hostile clients: request framing", .timeLimit(.minutes(3)))
struct ClientFramingTests {
    static let ok: [MisbehavingOrigin.Step] = [.text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")]

    @Test("a Content-Length with whitespace around the number: the origin gets the body, framed by its length",
          arguments: ["4 ", "  4  "])
    func contentLengthWithWhitespace(_ value: String) async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("POST \(origin.baseURL)/upload HTTP/1.1",
                                                     ["Host: 127.0.0.1:\(origin.port)", "Content-Length: \(value)"], body: "abcd"))
                    let response = try await client.readResponse()
                    #expect(response.status == 200)
                }
                // The body was read by the parser, so it must have gone upstream (it went nowhere: the request left
                // without a body, and the client's 4 bytes were dropped).
                let received = String(decoding: origin.received, as: UTF8.self)
                #expect(received.contains("Content-Length: 4\r\n"), "\(received)")
                #expect(received.hasSuffix("\r\n\r\nabcd"), "\(received)")
            }
        }
    }

    @Test("a framing hookproxy cannot pass on unchanged: 400 at once naming it, the connection closes, nothing goes upstream",
          arguments: [
            ("POST", "HTTP/1.1", ["Transfer-Encoding: gzip, chunked"], "4\r\nabcd\r\n0\r\n\r\n", "Transfer-Encoding"),
            ("POST", "HTTP/1.1", ["Transfer-Encoding: gzip", "Transfer-Encoding: chunked"], "4\r\nabcd\r\n0\r\n\r\n", "Transfer-Encoding"),
            // The parser refuses it too, but only after handing on the head, which started an upstream transfer.
            ("POST", "HTTP/1.1", ["Transfer-Encoding: xchunked"], "4\r\nabcd\r\n0\r\n\r\n", "Transfer-Encoding"),
            ("POST", "HTTP/1.0", ["Transfer-Encoding: chunked"], "4\r\nabcd\r\n0\r\n\r\n", "HTTP/1.0"),
            // A body on HEAD: libcurl waited for the response body its Content-Length announced (the idle timeout).
            ("HEAD", "HTTP/1.1", ["Content-Length: 4"], "abcd", "HEAD"),
            ("HEAD", "HTTP/1.1", ["Transfer-Encoding: chunked"], "4\r\nabcd\r\n0\r\n\r\n", "HEAD"),
            // Fits llhttp's 64 bits, not curl's 63: the body never ends, so the answer cannot wait for it.
            ("PUT", "HTTP/1.1", ["Content-Length: 18446744073709551615"], "abcd", "Content-Length"),
          ])
    func refusedFraming(method: String, version: String, framing: [String], body: String, named: String) async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("\(method) \(origin.baseURL)/upload \(version)",
                                                     ["Host: 127.0.0.1:\(origin.port)"] + framing, body: body))
                    let response = try await client.readResponse(method: method)
                    #expect(response.status == 400)
                    if method != "HEAD" {  // (an answer to HEAD has no body: the message is in the log)
                        #expect(response.bodyText.hasPrefix("hookproxy: bad request: "), "\(response.bodyText)")
                        #expect(response.bodyText.contains(named), "\(response.bodyText)")
                    }
                    #expect(await client.waitForClose())
                }
                #expect(origin.connections == 0, "\(String(decoding: origin.received, as: UTF8.self))")
                // (recorded on the loop after the answer is written: the client may read it first)
                #expect(await eventually(timeout: .seconds(10)) { !proxy.recorder.records.isEmpty })
                let record = try #require(proxy.recorder.records.first)
                #expect(record.response?.status == 400)
            }
        }
    }

    @Test("an upload the client cuts short (closes after 500 KB of 1 MB): the origin never gets a complete-looking request, and the log says how far it got",
          arguments: [false, true])
    func truncatedUpload(chunked: Bool) async throws {
        try await MisbehavingOrigin.with([.hang]) { origin in  // (it would answer a chunked upload at its head)
            try await withProxy { proxy in
                let client = try await RawClient.connect(port: proxy.port)
                let framing = chunked ? "Transfer-Encoding: chunked" : "Content-Length: 1000000"
                try await client.send(rawRequest("PUT \(origin.baseURL)/upload HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)", framing]))
                let part = [UInt8](repeating: 0x61, count: 10_000)
                for _ in 0..<50 {
                    try await client.send(chunked ? Array("2710\r\n".utf8) + part + Array("\r\n".utf8) : part)
                }
                // The origin has part of it before the client leaves: the transfer was under way.
                #expect(await eventually(timeout: .seconds(20)) { origin.received.count > 100_000 })
                client.close()
                let records = await proxy.recorder.waitFor(count: 1, timeout: .seconds(20))
                let error = try #require(records.first?.error)
                #expect(error.contains("before the end of its request body"), "\(error)")
                #expect(error.contains(chunked ? "500000 bytes so far" : "500000 of 1000000 bytes"), "\(error)")
                // The upstream connection is dropped, never ended as if the body were whole.
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 })
                let received = origin.received
                let body = received[(received.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound ?? 0)...]
                if chunked {
                    #expect(!String(decoding: body.suffix(7), as: UTF8.self).contains("0\r\n\r\n"), "no last chunk")
                } else {
                    #expect(body.count <= 500_000)
                }
            }
        }
    }

    @Test("a bad chunk size in the middle of an upload: 400, the transfer ends first, and the log gives the parser's reason (not 'client closed')")
    func badChunkMidUpload() async throws {
        try await MisbehavingOrigin.with([.hang]) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("POST \(origin.baseURL)/upload HTTP/1.1",
                                                     ["Host: 127.0.0.1:\(origin.port)", "Transfer-Encoding: chunked"],
                                                     body: "4\r\nabcd\r\n"))
                    #expect(await eventually(timeout: .seconds(20)) { origin.received.count > 0 }, "the upload is under way")
                    try await client.send("zz\r\nabcd\r\n0\r\n\r\n")
                    let response = try await client.readResponse()
                    #expect(response.status == 400)
                    #expect(response.bodyText.contains("invalid chunk size"), "\(response.bodyText)")
                    #expect(await client.waitForClose())
                }
                let records = await proxy.recorder.waitFor(count: 1)
                let error = try #require(records.first?.error)
                #expect(error == "hookproxy: bad request: invalid chunk size", "\(error)")
                #expect(await eventually(timeout: .seconds(20)) { origin.openConnections == 0 }, "the transfer was cancelled")
            }
        }
    }

    @Test("the parser's 400s name what is wrong: two Content-Lengths are not called 'with Transfer-Encoding'",
          arguments: [
            (["Content-Length: 4", "Content-Length: 4"], "two Content-Length fields"),
            (["Content-Length: 4", "Transfer-Encoding: chunked"], "Transfer-Encoding"),
            (["Transfer-Encoding: chunked", "Content-Length: 4"], "Transfer-Encoding"),
          ])
    func parserRefusalsSayWhy(framing: [String], says: String) async throws {
        try await withProxy { proxy in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("POST http://127.0.0.1:9/upload HTTP/1.1", ["Host: 127.0.0.1:9"] + framing,
                                                 body: "abcd"))
                let response = try await client.readResponse()
                #expect(response.status == 400)
                #expect(response.bodyText.contains(says), "\(response.bodyText)")
                if framing.allSatisfy({ $0.hasPrefix("Content-Length") }) {
                    #expect(!response.bodyText.contains("Transfer-Encoding"), "\(response.bodyText)")
                }
            }
        }
    }

    @Test("requests pipelined after one that closes the connection get no answer (not a 400)",
          arguments: [("HTTP/1.1", ["Connection: close"]), ("HTTP/1.0", [])])
    func bytesAfterAClosingRequest(version: String, closing: [String]) async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    let host = "Host: 127.0.0.1:\(origin.port)"
                    let next = rawRequest("GET \(origin.baseURL)/next HTTP/1.1", [host])
                    try await client.send(rawRequest("GET \(origin.baseURL)/closing \(version)", [host] + closing) + next + next)
                    let response = try await client.readResponse()
                    #expect(response.status == 200)
                    #expect(response.bodyText == "ok")
                    // The connection ends after that response: the client sends the others again on a new one.
                    let rest = String(decoding: try await client.readToEOF(), as: UTF8.self)
                    #expect(rest.isEmpty, "\(rest)")
                }
                let received = String(decoding: origin.received, as: UTF8.self)
                #expect(!received.contains("/next"), "\(received)")
                #expect(await eventually(timeout: .seconds(10)) { proxy.recorder.records.count == 1 })
            }
        }
    }

    @Test("Expect: 100-continue: an HTTP/1.1 client gets 100 then the answer; an HTTP/1.0 client only the answer")
    func expectContinue() async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                for version in ["HTTP/1.1", "HTTP/1.0"] {
                    try await withRawClient(proxy) { client in
                        try await client.send(rawRequest("POST \(origin.baseURL)/upload \(version)",
                                                         ["Host: 127.0.0.1:\(origin.port)", "Expect: 100-continue",
                                                          "Content-Length: 4"]))
                        if version == "HTTP/1.1" {
                            let interim = try await client.readResponse()
                            #expect(interim.status == 100)
                        }
                        try await client.send("abcd")
                        // An HTTP/1.0 client ignores the expectation (RFC 9110 §10.1.1): the first thing it reads is
                        // the final response.
                        let response = try await client.readResponse()
                        #expect(response.status == 200, "\(version): \(response.rawHead)")
                        #expect(response.bodyText == "ok", "\(version)")
                    }
                }
            }
        }
    }

    @Test("Expect: 100-continue to a request hookproxy answers itself (a mock, a 407): 100 at once, then the answer after the body",
          arguments: [false, true])
    func expectContinueAnsweredLocally(proxyAuth: Bool) async throws {
        let directory = try TemporaryDirectory()
        try directory.write("""
            rules:
              - name: mock
                match: { path: "/mock" }
                respond: { status: 201, body: "mocked" }
            """, to: "rules/mock.yaml")
        let store = try RuleStore(paths: [directory.path + "/rules"], environment: [:])
        try await withHookProxy(rules: store, {
            if proxyAuth { $0.proxyAuth = ProxyCredentials(user: "alice", password: "secret") }
        }) { proxy in
            try await withRawClient(proxy) { client in
                // Was: no 100, so a client waited for its own timeout before sending the body (curl: 1 s).
                try await client.send(rawRequest("POST http://127.0.0.1:9/mock HTTP/1.1",
                                                 ["Host: 127.0.0.1:9", "Expect: 100-continue", "Content-Length: 4"]))
                let interim = try await client.readResponse()
                #expect(interim.status == 100)
                try await client.send("abcd")
                let response = try await client.readResponse()
                #expect(response.status == (proxyAuth ? 407 : 201))
                #expect(await eventually(timeout: .seconds(10)) { proxy.recorder.records.map(\.requestBodySize) == [4] })
            }
        }
    }

    @Test("two Host fields: 400, nothing goes upstream")
    func twoHosts() async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                for target in ["/x", "\(origin.baseURL)/x"] {
                    try await withRawClient(proxy) { client in
                        try await client.send(rawRequest("GET \(target) HTTP/1.1",
                                                         ["Host: 127.0.0.1:\(origin.port)", "Host: elsewhere.invalid"]))
                        let response = try await client.readResponse()
                        #expect(response.status == 400, "\(target)")
                        #expect(response.bodyText.contains("Host"), "\(response.bodyText)")
                    }
                }
                #expect(origin.connections == 0)
            }
        }
    }

    @Test("a Connection field naming 16,000 fields, with 7,800 fields, in 64 KiB: answered in time (hop-by-hop stripping is linear)")
    func connectionNamingManyFields() async throws {
        try await MisbehavingOrigin.with(Self.ok) { origin in
            try await withProxy { proxy in
                // 16,000 × 7,800 comparisons of one-letter names held the event loop for a minute in a debug
                // build; the read timeout is far above the linear cost and far below the quadratic one.
                try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    let named = Array(repeating: "a", count: 16_000).joined(separator: ",")
                    let fields = Array(repeating: "b:", count: 7_800)
                    try await client.send(rawRequest("GET \(origin.baseURL)/x HTTP/1.1",
                                                     ["Host: 127.0.0.1:\(origin.port)", "Connection: a,\(named)", "a: gone"] + fields))
                    let response = try await client.readResponse()
                    #expect(response.status == 200)
                }
                let received = String(decoding: origin.received, as: UTF8.self)
                #expect(!received.contains("\r\na: gone"), "a field Connection names is hop-by-hop")
                #expect(received.contains("\r\nb:"), "the others pass")
            }
        }
    }
}
