import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 2, listener and upstream: requests through the in-process proxy reach a real TestOrigin over real sockets,
/// with curl and a raw byte-level client as clients.
@Suite("Forwarding through the proxy")
struct ProxyForwardingTests {
    // MARK: request forms, methods, versions

    @Test("an absolute-form GET (curl -x) returns the origin's bytes")
    func absoluteFormGet() async throws {
        try await withProxyAndOrigin { proxy, origin in
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/10000"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(isPattern(result.stdout, count: 10000), "\(patternMismatch(result.stdout, count: 10000))")
            let request = try #require(origin.requests.last)
            #expect(request.method == "GET")
            #expect(request.target == "/bytes/10000", "the origin gets origin-form")
        }
    }

    @Test("an origin-form request with Host goes to the Host")
    func originFormWithHost() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET /bytes/300?x=1 HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(isPattern(response.body, count: 300), "\(patternMismatch(response.body, count: 300))")
            }
            #expect(origin.requests.last?.target == "/bytes/300?x=1")
        }
    }

    static let methods = ["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PROPFIND", "PROPPATCH", "MKCOL", "COPY",
                          "MOVE", "LOCK", "UNLOCK", "SEARCH", "REPORT", "PURGE", "MKCALENDAR"]

    @Test("every method the parser knows reaches the origin, WebDAV included", arguments: methods)
    func methodReachesOrigin(_ method: String) async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("\(method) http://127.0.0.1:\(origin.port)/echo HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)", "Content-Length: 4"], body: "body"))
                let response = try await client.readResponse(method: method)
                #expect(response.status == 200, "\(method): \(response.rawHead)\(response.bodyText)")
                #expect(response.header("X-Method") == method)
                #expect(response.bodyText == "body")
            }
            #expect(origin.requests.map(\.method) == [method])
            #expect(origin.requests.first?.body == Array("body".utf8))
        }
    }

    @Test("a method token the parser cannot parse gets 400 with a message, and the proxy still serves")
    func unparseableMethod() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("BR@W http://127.0.0.1:\(origin.port)/echo HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 400)
                #expect(response.bodyText.hasPrefix("hookproxy: bad request"), "\(response.bodyText)")
                #expect(await client.waitForClose(), "the connection closes after a 400")
            }
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("FROBNICATE http://127.0.0.1:\(origin.port)/echo HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 400, "an unregistered method: \(response.rawHead)")
                #expect(response.bodyText.hasPrefix("hookproxy: bad request"), "\(response.bodyText)")
            }
            #expect(!origin.receivedAnyRequestBytes)
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("an HTTP/1.0 client gets its response and the connection closes")
    func http10Client() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/bytes/500 HTTP/1.0"))
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.version == "HTTP/1.0", "answers in the client's version")
                #expect(isPattern(response.body, count: 500), "\(patternMismatch(response.body, count: 500))")
                #expect(response.header("transfer-encoding") == nil, "no chunked framing to an HTTP/1.0 client")
                #expect(await client.waitForClose())
            }
            // A chunked origin body reaches an HTTP/1.0 client too (close-delimited or with a length).
            let result = try await curlThrough(proxy, ["--http1.0", "\(origin.baseURL)/chunked/70000"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(isPattern(result.stdout, count: 70000), "\(patternMismatch(result.stdout, count: 70000))")
        }
    }

    @Test("an HTTP/1.1 client keeps its connection for two requests; Connection: close closes it")
    func keepAliveAndClose() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                let host = "Host: 127.0.0.1:\(origin.port)"
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/bytes/100 HTTP/1.1", [host]))
                let first = try await client.readResponse()
                #expect(first.status == 200)
                #expect(isPattern(first.body, count: 100), "\(patternMismatch(first.body, count: 100))")
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/chunked/200 HTTP/1.1", [host]))
                let second = try await client.readResponse()
                #expect(second.status == 200)
                #expect(isPattern(second.body, count: 200), "\(patternMismatch(second.body, count: 200))")
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/bytes/10 HTTP/1.1", [host, "Connection: close"]))
                let third = try await client.readResponse()
                #expect(third.status == 200)
                #expect(isPattern(third.body, count: 10), "\(patternMismatch(third.body, count: 10))")
                #expect(third.header("connection")?.lowercased() == "close")
                #expect(await client.waitForClose(), "Connection: close closes the client connection")
            }
            #expect(origin.requests.count == 3)
        }
    }

    @Test("three pipelined requests are answered in order")
    func pipelining() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                let base = "http://127.0.0.1:\(origin.port)"
                let host = "Host: 127.0.0.1:\(origin.port)"
                // The first is slow at the origin, so a proxy answering out of order would show it.
                let all = rawRequest("GET \(base)/slow-head?ms=300 HTTP/1.1", [host])
                    + rawRequest("POST \(base)/echo HTTP/1.1", [host, "Content-Length: 6"], body: "second")
                    + rawRequest("GET \(base)/chunked/3000 HTTP/1.1", [host])
                try await client.send(all)
                let first = try await client.readResponse()
                let second = try await client.readResponse()
                let third = try await client.readResponse()
                #expect(first.status == 200 && first.bodyText == "slow head\n", "\(first.bodyText)")
                #expect(second.status == 200 && second.bodyText == "second", "\(second.bodyText)")
                #expect(third.status == 200 && third.body == pattern(count: 3000))
            }
        }
    }

    // MARK: bodies

    @Test("a 5 MB response arrives byte for byte")
    func largeResponse() async throws {
        try await withProxyAndOrigin { proxy, origin in
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/5000000"], timeout: .seconds(60))
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(result.stdout.count == 5_000_000)
            #expect(isPattern(result.stdout, count: 5_000_000), "\(patternMismatch(result.stdout, count: 5_000_000))")
            let chunked = try await curlThrough(proxy, ["\(origin.baseURL)/chunked/5000000"], timeout: .seconds(60))
            #expect(chunked.exitCode == 0, "\(chunked.stderr)")
            #expect(isPattern(chunked.stdout, count: 5_000_000), "\(patternMismatch(chunked.stdout, count: 5_000_000))")
        }
    }

    @Test("a 5 MB upload arrives byte for byte, with Content-Length and chunked", arguments: [false, true])
    func largeUpload(chunked: Bool) async throws {
        let directory = try TemporaryDirectory()
        let bytes = (0..<5_000_000).map { UInt8(truncatingIfNeeded: ($0 &* 7919) >> 3) }
        let file = try directory.write(bytes, to: "upload.bin")
        try await withProxyAndOrigin { proxy, origin in
            var args = ["--data-binary", "@\(file)", "-H", "Content-Type: application/octet-stream"]
            if chunked { args += ["-H", "Transfer-Encoding: chunked"] }
            let result = try await curlThrough(proxy, args + ["\(origin.baseURL)/sha256"], timeout: .seconds(60))
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "\(sha256Hex(bytes)) 5000000")
        }
    }

    @Test("a streamed response reaches the client while the origin still holds the rest; the rest follows its release")
    func streaming() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                // The origin sends the head and a first chunk, then holds the rest until the test releases it: the
                // first bytes can only reach the client if the proxy streams (no timer decides what "early" means).
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/held?key=stream&first=early-bytes HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                var received: [UInt8] = []
                for _ in 0..<1000 where !String(decoding: received, as: UTF8.self).contains("early-bytes") && !client.sawEOF {
                    received += try await client.read(atLeast: 1)
                }
                let early = String(decoding: received, as: UTF8.self)
                #expect(early.hasPrefix("HTTP/1.1 200"))
                #expect(early.lowercased().contains("transfer-encoding: chunked"))
                #expect(early.contains("early-bytes"), "the first chunk did not arrive while the origin held the rest")
                #expect(!early.hasSuffix("0\r\n\r\n"))
                origin.release("stream")
                for _ in 0..<1000 where !received.suffix(5).elementsEqual(Array("0\r\n\r\n".utf8)) && !client.sawEOF {
                    received += try await client.read(atLeast: 1)
                }
                let start = try #require(received.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound)
                #expect(String(decoding: dechunk(Array(received[start...])), as: UTF8.self) == "early-bytesreleased\n")
            }
        }
    }

    @Test("HEAD, 204 and 304 carry no body (the next response on the connection parses)")
    func bodylessResponses() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                let base = "http://127.0.0.1:\(origin.port)"
                let host = "Host: 127.0.0.1:\(origin.port)"
                try await client.send(rawRequest("HEAD \(base)/head-test HTTP/1.1", [host]))
                let head = try await client.readResponse(method: "HEAD")
                #expect(head.status == 200)
                #expect(head.header("X-Head-Test") == "yes")
                #expect(head.header("Content-Length") == "15", "HEAD keeps the origin's Content-Length")
                for code in [204, 304] {
                    try await client.send(rawRequest("GET \(base)/status/\(code) HTTP/1.1", [host]))
                    let response = try await client.readResponse()
                    #expect(response.status == code)
                    #expect(response.header("transfer-encoding") == nil)
                }
                // If any body bytes had followed, this response would not parse.
                try await client.send(rawRequest("GET \(base)/bytes/33 HTTP/1.1", [host]))
                let last = try await client.readResponse()
                #expect(last.status == 200)
                #expect(isPattern(last.body, count: 33), "\(patternMismatch(last.body, count: 33))")
            }
        }
    }

    // MARK: headers

    @Test("hop-by-hop headers are dropped; the others pass in order, with their case, duplicates kept")
    func hopByHopHeaders() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/headers HTTP/1.1", [
                    "Host: 127.0.0.1:\(origin.port)",
                    "X-First: 1",
                    "Connection: keep-alive, X-Named-By-Connection",
                    "X-Named-By-Connection: drop me",
                    "x-MiXeD-Case: Value With  Spaces",
                    "Keep-Alive: timeout=5",
                    "X-Dup: a",
                    "Proxy-Connection: keep-alive",
                    "Proxy-Authorization: Basic dXNlcjpwYXNz",
                    "TE: trailers",
                    "X-Dup: b",
                    "Trailer: X-Checksum",
                    "Upgrade: websocket",
                    "X-Last: z",
                ]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
            }
            let request = try #require(origin.requests.last)
            for dropped in ["Connection", "X-Named-By-Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
                            "Upgrade", "Transfer-Encoding"] {
                #expect(request.header(dropped) == nil, "\(dropped) reached the origin")
            }
            #expect(request.headerValues("TE") == ["trailers"], "TE: trailers is the one TE kept (issue 16)")
            #expect(request.headerValues("Trailer") == ["X-Checksum"], "Trailer names the request's trailers: kept")
            let lines = String(decoding: request.rawHead, as: UTF8.self).components(separatedBy: "\r\n")
            let kept = ["X-First: 1", "x-MiXeD-Case: Value With  Spaces", "X-Dup: a", "X-Dup: b", "X-Last: z"]
            let positions = kept.map { lines.firstIndex(of: $0) }
            #expect(positions.allSatisfy { $0 != nil }, "raw head at the origin:\n\(lines.joined(separator: "\n"))")
            let found = positions.compactMap { $0 }
            #expect(found == found.sorted(), "order changed:\n\(lines.joined(separator: "\n"))")
        }
    }

    @Test("the origin's response headers pass with duplicates (three Set-Cookie) and in order")
    func responseHeaders() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/set-cookies HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.headerValues("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/; HttpOnly", "c=3; Path=/; Secure"])
                #expect(response.headers.contains { $0.name == "Set-Cookie" }, "names keep their case")
                #expect(response.bodyText == "three cookies\n")
            }
        }
    }

    @Test("absolute-form requests reach the origin with Host set to the target")
    func hostIsTheTarget() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/headers HTTP/1.1",
                                                 ["Host: somewhere-else.invalid", "X-After: 1"]))
                let response = try await client.readResponse()
                #expect(response.status == 200)
            }
            #expect(origin.requests.last?.headerValues("Host") == ["127.0.0.1:\(origin.port)"])
        }
    }

    @Test("bodies are not decompressed or re-encoded; Accept-Encoding passes unchanged")
    func noDecompression() async throws {
        // gzip of "hello hookproxy, gzip me please\n"
        let gzipped: [UInt8] = [31, 139, 8, 0, 0, 0, 0, 0, 0, 3, 203, 72, 205, 201, 201, 87, 200, 200, 207, 207, 46, 40, 202,
                                175, 168, 212, 81, 72, 175, 202, 44, 80, 200, 77, 85, 40, 200, 73, 77, 44, 78, 229, 2, 0, 0,
                                106, 49, 196, 32, 0, 0, 0]
        let directory = try TemporaryDirectory()
        let file = try directory.write(gzipped, to: "body.gz")
        try await withProxyAndOrigin { proxy, origin in
            let result = try await curlThrough(proxy, ["--data-binary", "@\(file)", "-H", "Content-Encoding: gzip",
                                                       "-H", "Accept-Encoding: gzip, br", "\(origin.baseURL)/echo"])
            #expect(result.exitCode == 0, "\(result.stderr)")
            #expect(result.stdout == gzipped, "the echoed body changed")
            let request = try #require(origin.requests.last)
            #expect(request.body == gzipped)
            #expect(request.header("Content-Encoding") == "gzip")
            #expect(request.headerValues("Accept-Encoding") == ["gzip, br"])
        }
    }

    // MARK: connections

    @Test("the upstream connection is reused across client connections served by one event loop")
    func upstreamReuse() async throws {
        try await withProxyAndOrigin({ $0.eventLoops = 1 }) { proxy, origin in
            for _ in 0..<3 {
                let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/64"])
                #expect(result.exitCode == 0, "\(result.stderr)")
                #expect(isPattern(result.stdout, count: 64), "\(patternMismatch(result.stdout, count: 64))")
            }
            #expect(origin.requests.count == 3)
            #expect(origin.acceptedConnections == 1, "the origin accepted \(origin.acceptedConnections) connections")
        }
    }

    /// Each event loop keeps its own upstream connections (a request never changes thread): sequential client
    /// connections, spread over two loops, open at most one upstream connection per loop.
    @Test("each event loop opens at most one connection for sequential requests")
    func upstreamReusePerLoop() async throws {
        try await withProxyAndOrigin({ $0.eventLoops = 2 }) { proxy, origin in
            for _ in 0..<6 {
                let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/64"])
                #expect(result.exitCode == 0, "\(result.stderr)")
            }
            #expect(origin.requests.count == 6)
            #expect(origin.acceptedConnections <= 2, "the origin accepted \(origin.acceptedConnections) connections")
        }
    }

    @Test("a client that disconnects mid-response cancels the upstream transfer; the proxy still serves")
    func clientDisconnectMidResponse() async throws {
        try await withProxyAndOrigin { proxy, origin in
            try await withRawClient(proxy) { client in
                try await client.send(rawRequest("GET http://127.0.0.1:\(origin.port)/bytes/1073741824 HTTP/1.1",
                                                 ["Host: 127.0.0.1:\(origin.port)"]))
                let got = try await client.read(atLeast: 1_000_000)
                #expect(got.count >= 1_000_000)
                client.close()
            }
            let closed = await eventually(timeout: .seconds(10)) { origin.connections.first?.closed == true }
            #expect(closed, "the origin's connection stayed open after the client left")
            try await expectProxyStillServes(proxy, origin)
        }
    }

    @Test("an origin closing mid-body gives the client a partial transfer; the proxy still serves")
    func upstreamClosesMidBody() async throws {
        try await withProxyAndOrigin { proxy, origin in
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/close-mid-body/200000"])
            #expect(result.exitCode != 0, "curl reported success for a truncated body")
            #expect(result.stdout.count < 200_000)
            #expect(result.stdout == pattern(count: result.stdout.count), "the bytes that arrived are the origin's")
            try await expectProxyStillServes(proxy, origin)
        }
    }
}

/// Decodes a complete chunked body (test helper; no trailers).
func dechunk(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count - 1 {
        guard let lineEnd = (index..<(bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { break }
        let size = Int(String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16) ?? 0
        if size == 0 { break }
        out += bytes[(lineEnd + 2)..<min(bytes.count, lineEnd + 2 + size)]
        index = lineEnd + 2 + size + 2
    }
    return out
}
