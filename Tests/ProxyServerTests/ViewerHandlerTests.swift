import Foundation
import Logging
import ProxyLog
import NIOCore
import NIOEmbedded
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyServer

/// The viewer's path through the client pipeline on an `EmbeddedChannel` (no socket, the loop's clock in the test's
/// hands): its requests are answered and never recorded, and the event stream writes events, heartbeats and its end.
@Suite struct ViewerHandlerTests {
    typealias H = ProxyRequestHandlerTests

    /// A context with the viewer on, as `ProxyServer.start` makes it; stopped when `body` returns.
    /// An open `/api/events` stream (its head read) on a viewer, for `body`.
    static func withEventStream(_ body: @escaping (EmbeddedChannel, Viewer) throws -> Void) async throws {
        try await withViewer { context, viewer, _ in
            let channel = try H.makeChannel(context)
            defer { H.finish(channel) }
            try H.send(channel, "GET /api/events HTTP/1.1\r\nHost: \(H.own)\r\n\r\n")
            _ = try H.drain(channel)
            try body(channel, viewer)
        }
    }

    /// What the stream writes after the next coalescing interval.
    static func nextEvents(_ channel: EmbeddedChannel) throws -> String {
        channel.embeddedEventLoop.advanceTime(by: EventStream.coalescing)
        return String(decoding: try H.drain(channel), as: UTF8.self)
    }

    /// A record of a GET to one test URL, for the event stream's tests.
    static func exchange(_ id: Int) -> FlowRecord {
        let url = ProxyURL(string: "http://example.test/x")!
        return FlowRecord(id: id, start: Date(), client: "c", request: RequestHead(method: "GET", url: url), url: url.description)
    }

    static func withViewer(_ body: (ProxyContext, Viewer, RecordingRecorder) throws -> Void) async throws {
        let recorder = RecordingRecorder()
        let viewer = Viewer(settings: ViewerSettings())
        let configuration = ProxyConfiguration(host: "127.0.0.1", port: H.port,
                                               recorder: MultiRecorder([recorder, viewer.store]), captureBodies: true,
                                               logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let context = ProxyContext(configuration: configuration, viewer: viewer)
        context.listeningPort.store(H.port, ordering: .relaxed)
        var failure: (any Error)?
        do { try body(context, viewer, recorder) } catch { failure = error }
        await context.engine.shutdown()
        try? await context.shutdownPools()
        if let failure { throw failure }
    }

    @Test("API requests are answered on a kept-alive connection and are never flows")
    func apiIsNotRecorded() async throws {
        try await Self.withViewer { context, viewer, recorder in
            let channel = try H.makeChannel(context)
            defer { H.finish(channel) }
            // (The flow list is made in parts off the loop, as the HAR is: its tests use real sockets.)
            try H.send(channel, "GET /api/openapi.json HTTP/1.1\r\nHost: \(H.own)\r\n\r\nGET / HTTP/1.1\r\nHost: localhost:\(H.port)\r\n\r\n")
            let responses = try H.responses(channel)
            try #require(responses.count == 2)
            #expect(responses[0].statusLine == "HTTP/1.1 200 OK")
            #expect(responses[0].body.hasPrefix("{"))
            #expect(responses[1].header("content-type") == "text/html; charset=utf-8")
            #expect(channel.isActive)
            #expect(recorder.records.isEmpty)
            #expect(viewer.store.count == 0)
        }
    }

    @Test("the event stream: head, an event per flow, a heartbeat every 15 s, and its end when the store closes")
    func eventStream() async throws {
        try await Self.withViewer { context, viewer, _ in
            let channel = try H.makeChannel(context)
            defer { H.finish(channel) }
            try H.send(channel, "GET /api/events HTTP/1.1\r\nHost: \(H.own)\r\n\r\n")
            let head = String(decoding: try H.drain(channel), as: UTF8.self)
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(head.lowercased().contains("content-type: text/event-stream"))
            #expect(head.contains("retry: 2000"))
            #expect(viewer.store.watcherCount == 1)

            viewer.store.started(Self.exchange(9))
            channel.embeddedEventLoop.run()
            #expect(try H.drain(channel).isEmpty, "changes wait for others for a moment")
            channel.embeddedEventLoop.advanceTime(by: EventStream.coalescing)
            #expect(try H.drain(channel).isEmpty, "a flow first seen pending waits one more interval (it may end)")
            channel.embeddedEventLoop.advanceTime(by: EventStream.coalescing)
            let event = String(decoding: try H.drain(channel), as: UTF8.self)
            #expect(event.contains(#"event: flow"#))
            #expect(event.contains(#"data: {"state":"pending","id":9,"#))

            channel.embeddedEventLoop.advanceTime(by: .seconds(15))
            #expect(String(decoding: try H.drain(channel), as: UTF8.self).contains(": keep-alive\n\n"))

            viewer.store.close()
            channel.embeddedEventLoop.run()
            #expect(String(decoding: try H.drain(channel), as: UTF8.self).hasSuffix("0\r\n\r\n"))
            #expect(!channel.isActive)
            #expect(viewer.store.watcherCount == 0)
        }
    }

    @Test("a burst of changes larger than one batch is written whole, each flow's latest state once per batch")
    func burst() async throws {
        try await Self.withViewer { context, viewer, _ in
            let channel = try H.makeChannel(context)
            defer { H.finish(channel) }
            try H.send(channel, "GET /api/events HTTP/1.1\r\nHost: \(H.own)\r\n\r\n")
            _ = try H.drain(channel)
            let record = Self.exchange
            for _ in 0..<(EventStream.batch + 10) { viewer.store.started(record(1)) }
            viewer.store.record(record(2))
            channel.embeddedEventLoop.advanceTime(by: EventStream.coalescing)
            let text = String(decoding: try H.drain(channel), as: UTF8.self)
            #expect(text.contains(#""id":2,"#), "the flow after a full window of updates is written too")
        }
    }

    @Test("an exchange that starts and ends within the coalescing interval is one event, done")
    func coalesced() async throws {
        try await Self.withEventStream { channel, viewer in
            let record = Self.exchange(4)
            viewer.store.started(record)
            viewer.store.record(record)
            let text = try Self.nextEvents(channel)
            #expect(text.components(separatedBy: "event: flow").count == 2, "\(text)")
            #expect(text.contains(#"data: {"state":"done","id":4,"#))
        }
    }

    @Test("an exchange that ends in the interval after its start is one event too; one still pending then is two")
    func deferredPending() async throws {
        try await Self.withEventStream { channel, viewer in
            let quick = Self.exchange(5)
            let slow = Self.exchange(6)
            viewer.store.started(quick)
            viewer.store.started(slow)
            #expect(try Self.nextEvents(channel).isEmpty)
            viewer.store.record(quick)
            let second = try Self.nextEvents(channel)
            #expect(second.components(separatedBy: "event: flow").count == 3, "\(second)")
            #expect(second.contains(#"data: {"state":"pending","id":6,"#))
            #expect(second.contains(#"data: {"state":"done","id":5,"#))
            viewer.store.record(slow)
            let third = try Self.nextEvents(channel)
            #expect(third.components(separatedBy: "event: flow").count == 2, "\(third)")
            #expect(third.contains(#"data: {"state":"done","id":6,"#))
        }
    }

    /// The `flow` events in `text`: (id, state) in order.
    static func flowEvents(_ text: String) -> [(id: Int, state: String)] {
        text.components(separatedBy: "event: flow\ndata: ").dropFirst().compactMap { event in
            let json = event.prefix { $0 != "\n" }
            guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
                  let id = object["id"] as? Int, let state = object["state"] as? String else { return nil }
            return (id, state)
        }
    }

    @Test("the stream starts with the flows kept, then ready; one that changes before its turn comes once, at its change")
    func snapshotThenChanges() async throws {
        try await Self.withViewer { context, viewer, _ in
            let count = EventStream.batch + 40
            for id in 1...count { viewer.store.record(Self.exchange(id)) }
            viewer.store.started(Self.exchange(count + 1))
            let channel = try H.makeChannel(context)
            defer { H.finish(channel) }
            channel.isWritable = false  // the client is slow: the snapshot waits, taken but not yet written
            try H.send(channel, "GET /api/events HTTP/1.1\r\nHost: \(H.own)\r\n\r\n")
            var text = String(decoding: try H.drain(channel), as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK"))
            #expect(Self.flowEvents(text).isEmpty && !text.contains("event: ready"))
            // Changed before their turn in the snapshot: each sent once, from the change log, after `ready`.
            viewer.store.record(Self.exchange(count))
            viewer.store.record(Self.exchange(count + 1))
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            channel.embeddedEventLoop.run()
            text += String(decoding: try H.drain(channel), as: UTF8.self)
            text += try Self.nextEvents(channel)
            let events = Self.flowEvents(text)
            #expect(events.map(\.id) == Array(1..<count) + [count, count + 1], "\(events.suffix(4))")
            #expect(events.allSatisfy { $0.state == "done" })
            let ready = try #require(text.range(of: "event: ready\n"))
            let changed = try #require(text.range(of: #""id":\#(count),"#))
            #expect(ready.lowerBound < changed.lowerBound, "the changed flow comes after the snapshot, from its change")
            #expect(text.components(separatedBy: "event: ready").count == 2)
        }
    }

    @Test("a client that leaves stops its stream (no watcher left behind)")
    func clientLeaves() async throws {
        try await Self.withViewer { context, viewer, _ in
            let channel = try H.makeChannel(context)
            try H.send(channel, "GET /api/events HTTP/1.1\r\nHost: \(H.own)\r\n\r\n")
            #expect(viewer.store.watcherCount == 1)
            try channel.close().wait()
            channel.embeddedEventLoop.run()
            #expect(viewer.store.watcherCount == 0)
            H.finish(channel)
        }
    }
}
