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
        // One step: notCutByIdleTimeout's proxy closes a connection silent for 300 ms, a pause a busy pool can make.
        let client = try await RawClient.connect(
            port: proxy.port, readTimeout: readTimeout,
            sending: rawRequest("GET /api/events HTTP/1.1", ["Host: 127.0.0.1:\(proxy.port)", "Accept: text/event-stream"]))
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
            let lines = text.split(separator: "\n").filter { $0.hasPrefix("data: {\"") }  // (not ready's {})
            let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any] }
            #expect(!objects.isEmpty && objects.allSatisfy { $0["id"] is Int && $0["state"] is String })
            #expect(objects.last?["url"] as? String == "\(origin.baseURL)/bytes/5")
        }
    }

    /// The stream's events in `text` (its chunked framing included) as (kind, id, state, url); `ready`, `clear` and
    /// `reset` have no id.
    static func events(_ text: String) -> [(kind: String, id: Int?, state: String?, url: String?)] {
        // Without the chunks' "\r": as a Character, "\r\n" is one, and no "\n" would end the chunk-size line.
        let text = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 != "\r" }))
        return text.components(separatedBy: "\n\n").compactMap { block in
            let lines = block.split(separator: "\n")
            guard let kind = lines.first(where: { $0.hasPrefix("event: ") })?.dropFirst(7) else { return nil }
            let data = lines.first { $0.hasPrefix("data: ") }.map { Data($0.dropFirst(6).utf8) } ?? Data()
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            return (String(kind), object?["id"] as? Int, object?["state"] as? String, object?["url"] as? String)
        }
    }

    @Test("clients that connect during a burst see each flow once: the flows kept, then each change, in order")
    func exactlyOnceDuringBurst() async throws {
        try await withProxyAndOrigin({ $0.viewer = ViewerSettings() }) { proxy, origin in
            let store = try #require(proxy.server.viewer).store
            let total = 300, streams = 10
            let urls = (0..<total).flatMap { ["-o", "/dev/null", "\(origin.baseURL)/bytes/10?n=\($0)"] }
            async let burst = curlThrough(proxy, ["--parallel", "--parallel-max", "8"] + urls, timeout: .seconds(120))
            // Each client connects once the store grew a step further: all of them while flows are being recorded.
            var clients: [(client: RawClient, read: String)] = []
            defer { for (client, _) in clients { client.close() } }
            for index in 0..<streams {
                _ = await eventually(timeout: .seconds(30)) { store.count >= (index + 1) * total / (streams + 2) }
                clients.append(try await Self.openStream(proxy, readTimeout: .seconds(30)))
            }
            #expect(try await burst.exitCode == 0)
            // A last exchange after the burst: once a client has it (done), it has everything before it.
            let last = "\(origin.baseURL)/bytes/3?last"
            #expect(try await curlThrough(proxy, [last]).exitCode == 0)
            #expect(await eventually(timeout: .seconds(10)) { store.flows().allSatisfy(\.done) && store.count == total + 1 })
            let kept = Set(store.flows().map(\.id))
            for (index, (client, head)) in clients.enumerated() {
                var text = String(head[(head.range(of: "\r\n\r\n")?.upperBound ?? head.startIndex)...])
                let deadline = ContinuousClock.now + .seconds(30)  // (heartbeats would keep the reads going)
                while !Self.events(text).contains(where: { $0.url == last && $0.state == "done" }) && ContinuousClock.now < deadline {
                    let bytes = try await client.read(atLeast: 1)
                    if bytes.isEmpty { break }
                    text += String(decoding: bytes, as: UTF8.self)
                }
                let events = Self.events(text)
                #expect(events.filter { $0.kind == "ready" }.count == 1, "client \(index): one snapshot")
                #expect(!events.contains { $0.kind == "reset" || $0.kind == "clear" })
                var states: [Int: [String]] = [:]
                for event in events where event.kind == "flow" { states[event.id ?? 0, default: []].append(event.state ?? "?") }
                #expect(Set(states.keys) == kept, "client \(index): every flow kept, and no other")
                let wrong = states.filter { $0.value != ["done"] && $0.value != ["pending", "done"] }
                #expect(wrong.isEmpty, "client \(index): each flow once, or pending then done once: \(wrong.prefix(5))")
            }
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
