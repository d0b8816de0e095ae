import Foundation
import NIOCore
import NIOPosix
import ProxyModel
import ProxyTestSupport
@testable import ProxyUpstream
import Synchronization
import Testing

/// The engine's shape (issue 14): a transfer lives on the event loop that started it, many transfers share one loop
/// without walking each other, and stopping reaches every transfer.
@Suite(.timeLimit(.minutes(2)))
struct LoopEngineTests {
    /// Records, for every callback, whether it ran on the loop the transfer was started on.
    final class LoopCheckingDelegate: UpstreamTransferDelegate, Sendable {
        let loop: any EventLoop
        let offLoopCalls = Atomic<Int>(0)
        let calls = Atomic<Int>(0)
        let inner = TestDelegate()

        init(loop: any EventLoop) { self.loop = loop }

        private func check() {
            calls.wrappingAdd(1, ordering: .relaxed)
            if !loop.inEventLoop { offLoopCalls.wrappingAdd(1, ordering: .relaxed) }
        }

        func didReceiveHead(_ head: ResponseHead) { check(); inner.didReceiveHead(head) }
        func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow { check(); return inner.didReceiveBody(bytes) }
        func provideRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyFlow {
            check()
            let count = min(buffer.count, 1000 - inner.state.withLock { $0.sent })
            guard count > 0 else { return .end }
            for i in 0..<count { buffer[i] = UInt8(i % 251) }
            inner.state.withLock { $0.sent += count }
            return .bytes(count)
        }
        func didComplete(_ outcome: UpstreamOutcome) { check(); inner.didComplete(outcome) }
    }

    @Test func everyCallbackRunsOnTheLoopThatStartedTheTransfer() async throws {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var delegates: [LoopCheckingDelegate] = []
        for i in 0..<8 {
            let loop = group.next()
            let delegate = LoopCheckingDelegate(loop: loop)
            delegates.append(delegate)
            let head = RequestHead(method: i % 2 == 0 ? "GET" : "POST", url: ProxyURL(string: "\(origin.baseURL)/bytes/300000")!)
            let request = UpstreamRequest(head: head, body: i % 2 == 0 ? .none : .length(1000), settings: UpstreamSettings())
            // Half are started from the loop itself, half from this task's thread.
            if i % 4 < 2 {
                _ = try await loop.submit { engine.start(request, delegate: delegate, on: loop) }.get()
            } else {
                _ = engine.start(request, delegate: delegate, on: loop)
            }
        }
        for delegate in delegates {
            let outcome = try #require(await delegate.inner.waitForCompletion())
            #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
            #expect(isPattern(delegate.inner.body, count: 300_000), "\(patternMismatch(delegate.inner.body, count: 300_000))")
            #expect(delegate.calls.load(ordering: .relaxed) > 2)
            #expect(delegate.offLoopCalls.load(ordering: .relaxed) == 0)
        }
        await engine.shutdown()
        try await group.shutdownGracefully()
        try await origin.shutdown()
    }

    /// 300 transfers at once on one loop: each socket event reaches only its own transfer, and all complete exact.
    @Test func threeHundredConcurrentTransfersOnOneLoop() async throws {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine()
        let delegates = (0..<300).map { _ in TestDelegate() }
        for (i, delegate) in delegates.enumerated() {
            engine.start("GET", "\(origin.baseURL)/bytes/\(1000 + i)", delegate: delegate)
        }
        for (i, delegate) in delegates.enumerated() {
            let outcome = try #require(await delegate.waitForCompletion(timeout: .seconds(60)))
            #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
            #expect(isPattern(delegate.body, count: 1000 + i))
        }
        #expect(engine.statistics.transfers == 300)
        await engine.shutdown()
        try await origin.shutdown()
    }

    /// Stopping the engine ends every running transfer with a shutdown error, on its loop, and later starts fail
    /// the same way instead of hanging.
    @Test func shutdownEndsRunningTransfersAndRefusesNewOnes() async throws {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine()
        let hanging = TestDelegate()
        engine.start("GET", "\(origin.baseURL)/hang", delegate: hanging)
        #expect(await eventually(timeout: .seconds(10)) { origin.acceptedConnections == 1 })
        await engine.shutdown()
        let outcome = try #require(await hanging.waitForCompletion(timeout: .seconds(10)))
        #expect(outcome.error?.message == "hookproxy: shutting down 127.0.0.1:\(origin.port)")
        #expect(hanging.completions == 1)

        let late = TestDelegate()
        engine.start("GET", "\(origin.baseURL)/bytes/10", delegate: late)
        let lateOutcome = try #require(await late.waitForCompletion(timeout: .seconds(10)))
        #expect(lateOutcome.error?.message == "hookproxy: shutting down 127.0.0.1:\(origin.port)")
        try await origin.shutdown()
    }

    /// The watcher and the loop engines refer to each other while the watcher thread runs; after shutdown nothing
    /// keeps them, so each engine's epoll and eventfd descriptors are closed (a test run makes hundreds of engines).
    @Test func aShutDownEngineFreesItsWatcher() async throws {
        let origin = try await TestOrigin.start()
        weak var watcher: SocketWatcher?
        do {
            let engine = UpstreamEngine()
            watcher = engine.watcher
            let delegate = TestDelegate()
            engine.start("GET", "\(origin.baseURL)/bytes/10", delegate: delegate)
            _ = try #require(await delegate.waitForCompletion())
            await engine.shutdown()
        }
        #expect(await eventually(timeout: .seconds(10)) { watcher == nil })
        try await origin.shutdown()
    }
}

/// A busy loop polls its own set of curl's sockets (issue 14: no thread change on the hot path); the watcher thread
/// only wakes a loop that went to sleep.
@Suite(.timeLimit(.minutes(2)))
struct LoopPollingTests {
    @Test func aBusyLoopFindsReadySocketsWithoutTheWatcher() async throws {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        // 16 clients on one loop, 40 requests each, one after another: answers arrive while the loop is at work.
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for _ in 0..<16 {
                tasks.addTask {
                    for _ in 0..<40 {
                        let delegate = TestDelegate()
                        let request = UpstreamRequest(
                            head: RequestHead(method: "GET", url: ProxyURL(string: "\(origin.baseURL)/bytes/1000")!),
                            body: .none, settings: UpstreamSettings())
                        _ = engine.start(request, delegate: delegate, on: loop)
                        let outcome = try #require(await delegate.waitForCompletion())
                        #expect(outcome.error == nil)
                    }
                }
            }
            try await tasks.waitForAll()
        }
        let statistics = engine.statistics
        #expect(statistics.transfers == 640)
        // Some of the ready sockets were found by the loop's own polls, not through a wake-up by the watcher.
        #expect(statistics.readySockets > 0)
        #expect(statistics.wakeups < statistics.readySockets)
        await engine.shutdown()
        try await group.shutdownGracefully()
        try await origin.shutdown()
    }
}
