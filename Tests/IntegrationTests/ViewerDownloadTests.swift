import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import ProxyUI
import Testing

/// `GET /api/har` built the whole file (hundreds of MB when the store is full) and handed it to the connection at
/// once: a client that did not read kept all of it in the channel until `--idle-timeout`, and N such clients N
/// copies. The file is now written a part at a time, the next made only once the client took the last.
@Suite("viewer: HAR downloads in parts, held back by a client that does not read", .timeLimit(.minutes(4)))
struct ViewerDownloadTests {
    static let flows = 40
    static let bodySize = 1 << 20

    /// GET /api/har (or `path`) on a new connection, read whole.
    static func download(port: Int, path: String = "/api/har") async throws -> RawClient.Response {
        let client = try await RawClient.connect(port: port, readTimeout: .seconds(120))
        defer { client.close() }
        try await client.send(rawRequest("GET \(path) HTTP/1.1", ["Host: 127.0.0.1:\(port)"]))
        return try await client.readResponse()
    }

    /// The entries of a HAR file, or an issue.
    static func entries(_ body: [UInt8]) throws -> [[String: Any]] {
        let log = (try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["log"] as? [String: Any]
        return try #require(log?["entries"] as? [[String: Any]], "not a HAR: \(String(decoding: body.prefix(200), as: UTF8.self))")
    }

    /// The flow list with bodies was built whole too: a review's eight idle readers of 120 flows of 1 MiB took the
    /// proxy from 160 MB to 1.54 GB.
    @Test("N clients that do not read a big HAR, or the flow list with bodies, do not cost the proxy N copies of it",
          arguments: ["/api/har", "/api/flows"])
    func nonReadingClientsHoldLittle(_ path: String) async throws {
        let directory = try TemporaryDirectory()
        // a long idle timeout: the stalled downloads stay open for the whole measurement
        let (cli, port) = try await ViewerCommandTests.start(["--idle-timeout", "300s"], in: directory)
        defer { cli.kill() }
        try await withOrigin { origin in
            let urls = (0..<Self.flows).flatMap { ["-o", "/dev/null", "\(origin.baseURL)/bytes/\(Self.bodySize)?n=\($0)"] }
            let fill = try await CurlCLI.run(["-s", "-S", "-x", "http://127.0.0.1:\(port)"] + urls, timeout: .seconds(120))
            try #require(fill.exitCode == 0, "\(fill.stderr)")
        }
        #expect(await eventually(timeout: .seconds(20)) {
            let answer = try? await ViewerCommandTests.status("http://127.0.0.1:\(port)/api/flows?bodies=false")
            let listed = answer.flatMap { try? JSONSerialization.jsonObject(with: Data($0.body.utf8)) } as? [[String: Any]]
            return listed?.count == Self.flows && listed?.allSatisfy { $0["state"] as? String == "done" } == true
        })

        // A reading client: the whole file, valid, every body in it (binary: base64).
        let whole = try await Self.download(port: port)
        #expect(whole.status == 200)
        #expect(whole.header("content-disposition")?.contains("attachment") == true)
        let entries = try Self.entries(whole.body)
        #expect(entries.count == Self.flows)
        #expect(entries.allSatisfy { (($0["response"] as? [String: Any])?["content"] as? [String: Any])?["text"] is String })
        // Every download whole (a cut one once hid the idle-connection guard shutting a connection in use).
        let sizes = entries.map { (($0["response"] as? [String: Any])?["content"] as? [String: Any])?["size"] as? Int }
        #expect(sizes.allSatisfy { $0 == Self.bodySize }, "sizes: \(sizes)")
        let harSize = whole.body.count
        #expect(harSize > Self.flows * Self.bodySize)
        var answerSize = harSize
        if path == "/api/flows" {
            let list = try await Self.download(port: port, path: path)
            #expect(list.status == 200 && list.header("content-type") == "application/json")
            let listed = try JSONSerialization.jsonObject(with: Data(list.body)) as? [[String: Any]]
            #expect(listed?.count == Self.flows)
            answerSize = list.body.count
            #expect(answerSize > Self.flows * Self.bodySize)
        }

        // N clients ask for it and stop reading once the head is in (a small receive window: the kernel takes
        // little of it for them).
        let stalled = 4
        let before = try #require(cli.residentBytes)
        var clients: [RawClient] = []
        defer { for client in clients { client.close() } }
        for _ in 0..<stalled {
            let client = try await RawClient.connect(port: port, readTimeout: .seconds(120), receiveBuffer: 4096)
            clients.append(client)
            try await client.send(rawRequest("GET \(path) HTTP/1.1", ["Host: 127.0.0.1:\(port)"]))
        }
        for client in clients {
            let first = try await client.read(atLeast: 12)
            #expect(String(decoding: first, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        }
        // Whatever each holds is there once its head arrived (the old code wrote the head with the whole body);
        // the largest RSS seen over a moment, against the proxy's before them.
        var peak = 0
        for _ in 0..<10 {
            peak = max(peak, cli.residentBytes ?? 0)
            try await Task.sleep(for: .milliseconds(100))
        }
        let grown = peak - before
        #expect(grown < answerSize,
                "\(stalled) stalled downloads of \(path), \(answerSize >> 20) MiB, grew the proxy by \(grown >> 20) MiB (\(before >> 20) → \(peak >> 20) MiB)")

        // The stalled ones hold up no one: another reading client still gets the whole file meanwhile.
        let again = try await Self.download(port: port)
        #expect(again.status == 200)
        #expect(try Self.entries(again.body).count == Self.flows)
        cli.signal(SIGTERM)
        #expect(await cli.waitForExit(timeout: .seconds(20)) == 0, "stderr: \(cli.stderrText)")
    }

    /// A store past `ViewerGate.inlineBytes` of `count` flows with a binary body of `size` each.
    static func fill(_ store: FlowStore, count: Int, size: Int) {
        let body = CapturedBody(bytes: pattern(count: size))
        for id in 1...count {
            store.record(FlowRecord(
                id: 1_000_000 + id, start: Date(), client: "test",
                request: RequestHead(method: "GET", url: ProxyURL(string: "http://bulk.test/\(id)")!),
                url: "http://bulk.test/\(id)",
                response: ResponseHead(status: 200, headers: [("Content-Type", "application/octet-stream")]),
                responseBodySize: size, responseBody: body))
        }
    }

    @Test("a download the client stopped reading is closed at the idle timeout, and the loop serves on meanwhile")
    func stalledDownloadClosedAtIdleTimeout() async throws {
        try await withProxyAndOrigin({
            $0.viewer = ViewerSettings()
            $0.limits.clientIdleTimeoutMs = 500
            $0.eventLoops = 1
        }) { proxy, origin in
            Self.fill(try #require(proxy.server.viewer).store, count: 16, size: 1 << 20)
            // One step: a connection silent for 500 ms is closed, a pause a busy cooperative pool can make.
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), receiveBuffer: 4096,
                                                     sending: rawRequest("GET /api/har HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)"]))
            defer { client.close() }
            #expect(String(decoding: try await client.read(atLeast: 12), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/7"])
            #expect(result.exitCode == 0, "the one loop still serves: \(result.stderr)")
            // Not read for ten idle timeouts: closed by then, so what arrives after is what was on its way (the
            // socket buffers and the part in flight), far from the whole file (16 MiB of bodies, as base64).
            try await Task.sleep(for: .seconds(5))
            let rest = try await client.readToEOF(limit: 64 << 20)
            #expect(client.sawEOF)
            #expect(rest.count < 8 << 20, "\(rest.count) bytes after the stall: the download was not cut")
        }
    }

    @Test("an HTTP/1.0 download (or event stream) is unframed, ending with the close; an HTTP/1.1 one is chunked")
    func framing() async throws {
        try await withProxyAndOrigin({ $0.viewer = ViewerSettings() }) { proxy, _ in
            Self.fill(try #require(proxy.server.viewer).store, count: 3, size: 600 << 10)
            let host = "Host: 127.0.0.1:\(proxy.port)"
            try await withRawClient(proxy, readTimeout: .seconds(30)) { client in
                try await client.send(rawRequest("GET /api/har HTTP/1.0", [host]))
                let har = try await client.readResponse()
                #expect(har.status == 200)
                #expect(har.header("content-length") == nil && har.header("transfer-encoding") == nil)
                #expect(try Self.entries(har.body).count == 3)
                #expect(await client.waitForClose())
            }
            // The event stream too: it was sent chunked to HTTP/1.0 clients, who cannot read that (a review's find).
            try await withRawClient(proxy, readTimeout: .seconds(30)) { client in
                try await client.send(rawRequest("GET /api/events HTTP/1.0", [host]))
                let start = String(decoding: try await client.read(atLeast: 200), as: UTF8.self)
                #expect(start.hasPrefix("HTTP/1.0 200"), "\(start.prefix(300))")
                #expect(!start.lowercased().contains("transfer-encoding"), "\(start.prefix(300))")
                #expect(start.contains("\r\n\r\nretry: 2000\n\n"), "unframed: \(start.prefix(400))")
            }
            try await withRawClient(proxy, readTimeout: .seconds(30)) { client in
                try await client.send(rawRequest("GET /api/har HTTP/1.1", [host]) + rawRequest("HEAD /api/har HTTP/1.1", [host])
                    + rawRequest("GET /api/flows?bodies=false HTTP/1.1", [host]))
                let har = try await client.readResponse()
                #expect(har.header("transfer-encoding") == "chunked")
                #expect(try Self.entries(har.body).count == 3)
                let head = try await client.readResponse(method: "HEAD")
                #expect(head.status == 200)
                let flows = try await client.readResponse()
                #expect(flows.status == 200, "the HEAD answer carried no body, so the next response reads right")
                #expect(flows.bodyText.hasPrefix("["))
            }
        }
    }
}
