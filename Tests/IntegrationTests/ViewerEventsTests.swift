import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import ProxyUI
import Testing

/// Issue 17: `/api/events`, the viewer's live updates — delivered, never cut by the idle timeout, ended at shutdown.
@Suite("viewer: server-sent events (issue 17)", .timeLimit(.minutes(3)))
struct ViewerEventsTests {
    /// Opens `/api/events` on a new connection and reads its head.
    static func openStream(_ proxy: ProxyHarness, readTimeout: Duration = .seconds(10)) async throws -> (RawClient, String) {
        let client = try await RawClient.connect(port: proxy.port, readTimeout: readTimeout)
        try await client.send(rawRequest("GET /api/events HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)", "Accept: text/event-stream"]))
        let text = try await client.readText(until: "retry:")
        return (client, text)
    }

    @Test("the stream answers text/event-stream and sends one event per new or updated exchange, with id and state")
    func live() async throws {
        try await withProxyAndOrigin({ $0.viewer = ViewerSettings() }) { proxy, origin in
            let (client, head) = try await Self.openStream(proxy)
            defer { client.close() }
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(head.lowercased().contains("content-type: text/event-stream"))
            #expect(!head.lowercased().contains("access-control-"))
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/5"])
            #expect(result.exitCode == 0)
            let text = try await client.readText(until: #""state":"done""#)
            #expect(text.contains("event: flow\ndata: {"))
            let lines = text.split(separator: "\n").filter { $0.hasPrefix("data: {") }
            let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any] }
            #expect(!objects.isEmpty && objects.allSatisfy { $0["id"] is Int && $0["state"] is String })
            #expect(objects.last?["url"] as? String == "\(origin.baseURL)/bytes/5")
        }
    }

    @Test("the idle timeout does not cut the stream, and the event loop keeps serving beside it")
    func notCutByIdleTimeout() async throws {
        try await withProxyAndOrigin({
            $0.viewer = ViewerSettings()
            $0.limits.clientIdleTimeoutMs = 300
            $0.limits.headerTimeoutMs = 300
            $0.eventLoops = 1
        }) { proxy, origin in
            let (client, _) = try await Self.openStream(proxy)
            defer { client.close() }
            try await Task.sleep(for: .milliseconds(1200))  // four idle timeouts
            let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/7"])
            #expect(result.exitCode == 0, "the one loop still serves: \(result.stderr)")
            let text = try await client.readText(until: "/bytes/7")
            #expect(text.contains("event: flow"))
        }
    }

    @Test("shutdown ends the stream cleanly: its last chunk, then the close")
    func endsAtShutdown() async throws {
        let proxy = try await ProxyHarness.start { $0.viewer = ViewerSettings() }
        let (client, _) = try await Self.openStream(proxy)
        defer { client.close() }
        #expect(proxy.server.viewer?.store.watcherCount == 1)
        await proxy.stop()
        let rest = String(decoding: try await client.readToEOF(), as: UTF8.self)
        #expect(rest.hasSuffix("0\r\n\r\n"), "the chunked body ends: \(rest.suffix(40).debugDescription)")
    }
}

extension RawClient {
    /// Reads until the text read so far contains `marker` (bounded by the read timeout); returns all of it.
    func readText(until marker: String) async throws -> String {
        var text = ""
        while !text.contains(marker) {
            let bytes = try await read(atLeast: 1)
            if bytes.isEmpty { break }
            text += String(decoding: bytes, as: UTF8.self)
        }
        return text
    }
}
