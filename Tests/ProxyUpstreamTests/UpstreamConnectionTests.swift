import Foundation
import NIOCore
import NIOPosix
import ProxyModel
import ProxyTestSupport
@testable import ProxyUpstream
import Synchronization
import Testing

/// Handed-over connections (`UpstreamEngine.connect`, the bytes of a WebSocket or another upgrade): one that curl
/// made without TLS is carried by a NIO channel on its own loop (no hop through the socket watcher thread), with the
/// same contract as the curl carrier — every byte both ways, backpressure, and the server's close reported once.
@Suite(.timeLimit(.minutes(2)))
struct UpstreamConnectionTests {
    /// Hears one connection's callbacks on its loop and lets the test read them.
    final class ConnectionRecorder: UpstreamConnectionDelegate, @unchecked Sendable {
        struct State {
            var connection: NIOLoopBound<UpstreamConnection>?
            var connectFailure: ProxyError?
            var received: [UInt8] = []
            var closed: ProxyError?? = .none
            var offLoopCalls = 0
            var writableCalls = 0
            var receivedAfterClose = 0
            var closedCalls = 0
        }

        let loop: any EventLoop
        let state = Mutex(State())
        /// Called on the loop with the connection once connected (e.g. to hold reading at once).
        let onConnected: (UpstreamConnection) -> Void

        init(loop: any EventLoop, onConnected: @escaping (UpstreamConnection) -> Void = { _ in }) {
            self.loop = loop
            self.onConnected = onConnected
        }

        private func check() {
            if !loop.inEventLoop { state.withLock { $0.offLoopCalls += 1 } }
        }

        func upstreamConnected(_ connection: UpstreamConnection, _ outcome: UpstreamOutcome) {
            check()
            let bound = NIOLoopBound(connection, eventLoop: loop)
            state.withLock { $0.connection = bound }
            onConnected(connection)
        }

        func upstreamConnectFailed(_ outcome: UpstreamOutcome) {
            check()
            state.withLock { $0.connectFailure = outcome.error }
        }

        func upstreamReceived(_ bytes: ByteBuffer) {
            check()
            state.withLock {
                if $0.closed != nil { $0.receivedAfterClose += 1 }
                $0.received.append(contentsOf: bytes.readableBytesView)
            }
        }

        func upstreamWritable() {
            check()
            state.withLock { $0.writableCalls += 1 }
        }

        func upstreamClosed(_ error: ProxyError?) {
            check()
            state.withLock {
                $0.closed = .some(error)
                $0.closedCalls += 1
            }
        }

        /// The connection, usable on the loop only.
        var connection: NIOLoopBound<UpstreamConnection>? { state.withLock { $0.connection } }
        var receivedCount: Int { state.withLock { $0.received.count } }
    }

    /// Echoes every byte; or, with `blast`, sends that many bytes at once and closes.
    final class ServerHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let blast: Int?

        init(blast: Int?) { self.blast = blast }

        func channelActive(context: ChannelHandlerContext) {
            guard let blast else { return }
            let bytes = ByteBuffer(bytes: (0..<blast).map { UInt8($0 % 253) })
            context.writeAndFlush(wrapOutboundOut(bytes)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    static func server(group: any EventLoopGroup, blast: Int? = nil) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ServerHandler(blast: blast)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    static func connect(_ engine: UpstreamEngine, to server: any Channel, on loop: any EventLoop,
                        recorder: ConnectionRecorder) throws {
        let port = try #require(server.localAddress?.port)
        let head = RequestHead(method: "GET", url: try #require(ProxyURL(string: "http://127.0.0.1:\(port)/")))
        _ = engine.connect(UpstreamRequest(head: head, body: .none, settings: UpstreamSettings()), delegate: recorder, on: loop)
    }

    /// A test server on a new group, an engine, and a connection to the server asked for on one of the group's loops.
    struct Setup {
        let group: MultiThreadedEventLoopGroup
        let server: any Channel
        let engine: UpstreamEngine
        let loop: any EventLoop
        let recorder: ConnectionRecorder

        init(threads: Int, blast: Int? = nil, held: HeldServer? = nil,
             onConnected: @escaping (UpstreamConnection) -> Void = { _ in }) async throws {
            group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            if let held {
                server = try await UpstreamConnectionTests.heldServer(group: group, held)
            } else {
                server = try await UpstreamConnectionTests.server(group: group, blast: blast)
            }
            engine = UpstreamEngine()
            loop = group.next()
            recorder = ConnectionRecorder(loop: loop, onConnected: onConnected)
            try UpstreamConnectionTests.connect(engine, to: server, on: loop, recorder: recorder)
            try await eventually(timeout: .seconds(30)) { recorder.connection != nil }  // a loaded machine
        }

        func tearDown() async throws {
            await engine.shutdown()
            try await server.close()
            try await group.shutdownGracefully()
        }
    }

    @Test func aPlainConnectionIsCarriedOnItsLoopAndEchoesEveryByte() async throws {
        let setup = try await Setup(threads: 2)
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        #expect(try await loop.submit { connection.value.isCarriedByChannel }.get())

        // 3 MiB in 64 KiB writes, echoed back whole and in order.
        let payload = (0..<(3 << 20)).map { UInt8(($0 * 7) % 251) }
        try await loop.submit {
            for start in stride(from: 0, to: payload.count, by: 65536) {
                connection.value.write(ByteBuffer(bytes: payload[start..<min(start + 65536, payload.count)]))
            }
        }.get()
        try await eventually(timeout: .seconds(20)) { recorder.receivedCount >= payload.count }
        #expect(recorder.state.withLock { $0.received } == payload)
        #expect(recorder.state.withLock { $0.offLoopCalls } == 0)

        try await loop.submit { connection.value.close() }.get()
        try await setup.tearDown()
    }

    /// Pieces queued with `flush: false` (a frame's header and payload) stay queued until `flush`, then reach the
    /// echo server in order; a flush with nothing queued is harmless.
    @Test func queuedPiecesLeaveAtTheFlushInOrder() async throws {
        let setup = try await Setup(threads: 1)
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        let pieces = (0..<10).map { i in ByteBuffer(bytes: (0..<(i * 37 + 2)).map { UInt8(($0 + i) % 251) }) }
        let queued = try await loop.submit {
            for piece in pieces { connection.value.write(piece, flush: false) }
            return connection.value.bufferedBytes
        }.get()
        #expect(queued == pieces.reduce(0) { $0 + $1.readableBytes }, "nothing goes before the flush")
        try await Task.sleep(for: .milliseconds(100))
        #expect(recorder.receivedCount == 0)
        try await loop.submit {
            connection.value.flush()
            connection.value.flush()
        }.get()
        let expected = pieces.flatMap { Array($0.readableBytesView) }
        try await eventually(timeout: .seconds(20)) { recorder.receivedCount >= expected.count }
        #expect(recorder.state.withLock { $0.received } == expected)
        try await loop.submit { connection.value.close() }.get()
        try await setup.tearDown()
    }

    @Test func holdingReadsHoldsTheServerBackAndResumingDeliversEveryByteThenTheClose() async throws {
        let size = 8 << 20
        let setup = try await Setup(threads: 1, blast: size) { $0.setReading(false) }
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        #expect(try await loop.submit { connection.value.isCarriedByChannel }.get())

        try await Task.sleep(for: .milliseconds(300))
        // Held: at most what one read takes, nothing like the 8 MiB the server wants to send.
        #expect(recorder.receivedCount < 1 << 20)
        #expect(recorder.state.withLock { $0.closed } == nil)

        try await loop.submit { connection.value.setReading(true) }.get()
        try await eventually(timeout: .seconds(20)) { recorder.state.withLock { $0.closed } != nil }
        let state = recorder.state.withLock { $0 }
        #expect(state.received.count == size)
        #expect(state.received == (0..<size).map { UInt8($0 % 253) })
        #expect(state.closed == .some(nil), "the server's close is reported once, without an error")
        #expect(state.offLoopCalls == 0)
        try await setup.tearDown()
    }

    /// Found by a hostile review: a relay whose client's channel failed under a write ended the session inside the
    /// flush, then held reading (the channel was unwritable) after `closeWhenSent` had taken the connection over. The
    /// server's close then went unseen, behind bytes nobody read, until the idle bound.
    @Test func closeWhenSentReadsToTheServersCloseWhateverTheRelayAsksAfter() async throws {
        let setup = try await Setup(threads: 1, blast: 8 << 20) { $0.setReading(false) }
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        try await Task.sleep(for: .milliseconds(200))
        try await loop.submit {
            connection.value.closeWhenSent(idleTimeout: .seconds(30))
            connection.value.setReading(false)
        }.get()
        // The server closes once it sent its 8 MiB: read (and dropped) at once, well inside the 30 s bound.
        #expect(await eventually(timeout: .seconds(10)) {
            (try? await loop.submit { connection.value.isOpen }.get()) == false
        })
        #expect(recorder.state.withLock { $0.closedCalls } == 0, "the delegate hears nothing after closeWhenSent")
        try await setup.tearDown()
    }

    @Test func shuttingTheEngineDownClosesACarriedConnectionAndSaysSo() async throws {
        let setup = try await Setup(threads: 1)
        let recorder = setup.recorder
        await setup.engine.shutdown()
        let closed = try #require(recorder.state.withLock { $0.closed })
        #expect(closed?.message.contains("shutting down") == true)
        #expect(try await setup.loop.submit { recorder.connection?.value.isOpen }.get() == false)
        try await setup.tearDown()
    }

    @Test func curlKeepsTheConnectionsItSpeaksTLSOn() {
        func transfer(_ url: String, proxy: String? = nil) -> CurlTransfer {
            let head = RequestHead(method: "GET", url: ProxyURL(string: url)!)
            let request = UpstreamRequest(head: head, body: .none, settings: UpstreamSettings(upstreamProxy: proxy))
            return CurlTransfer(id: 1, request: request, delegate: ConnectOnlyDelegate(ConnectionRecorder(loop: MultiThreadedEventLoopGroup.singleton.next())))
        }
        #expect(!transfer("http://example.test/").hasTLS)
        #expect(!transfer("http://example.test/", proxy: "http://proxy.test:3128").hasTLS)
        #expect(!transfer("http://example.test/", proxy: "socks5h://proxy.test:1080").hasTLS)
        #expect(transfer("https://example.test/").hasTLS)
        #expect(transfer("http://example.test/", proxy: "HTTPS://proxy.test:443").hasTLS)
    }

    /// Resets the connection at once (SO_LINGER 0), optionally after sending `bytes`.
    final class ResettingHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let bytes: Int

        init(bytes: Int) { self.bytes = bytes }

        func channelActive(context: ChannelHandlerContext) {
            let payload = ByteBuffer(bytes: [UInt8](repeating: 7, count: bytes))
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(200)) { self.reset(bound.value, payload) }
        }

        private func reset(_ context: ChannelHandlerContext, _ payload: ByteBuffer) {
            context.writeAndFlush(wrapOutboundOut(payload)).assumeIsolated().whenComplete { _ in
                _ = (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
                context.close(promise: nil)
            }
        }
    }

    /// Reads nothing until told (`autoRead` off), keeping its child channel for the test.
    final class HeldServer: @unchecked Sendable {
        let child = Mutex<(any Channel)?>(nil)
    }

    static func heldServer(group: any EventLoopGroup, _ held: HeldServer) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { channel in
                held.child.withLock { $0 = channel }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// The server sends a little and closes while the caller holds reading: nothing may reach the caller, and the
    /// close not either, until it reads again (the curl carrier holds both: it does not even look at the socket).
    @Test func aServerThatSendsAndClosesWhileReadsAreHeldWaitsForTheResume() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let size = 40_000
        let server = try await Self.server(group: group, blast: size)
        let engine = UpstreamEngine()
        let loop = group.next()
        let carried = Mutex(false)
        let recorder = ConnectionRecorder(loop: loop) { connection in
            connection.setReading(false)
            carried.withLock { $0 = connection.isCarriedByChannel }
        }
        try Self.connect(engine, to: server, on: loop, recorder: recorder)
        try await eventually(timeout: .seconds(30)) { recorder.connection != nil }  // a loaded machine
        let connection = try #require(recorder.connection)
        #expect(carried.withLock { $0 })

        try await Task.sleep(for: .milliseconds(300))
        #expect(recorder.receivedCount == 0, "reading is held: no byte may be delivered")
        #expect(recorder.state.withLock { $0.closedCalls } == 0, "reading is held: the close waits too")

        try await loop.submit { connection.value.setReading(true) }.get()
        try await eventually { recorder.state.withLock { $0.closedCalls } > 0 }
        let state = recorder.state.withLock { $0 }
        #expect(state.received.count == size)
        #expect(state.closedCalls == 1)
        #expect(state.closed == .some(nil))
        #expect(state.receivedAfterClose == 0)

        await engine.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A server that resets the connection: the caller hears a failure, not a clean close (as from curl).
    @Test func aResetIsReportedAsAFailure() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ResettingHandler(bytes: 1000)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let engine = UpstreamEngine()
        let loop = group.next()
        let recorder = ConnectionRecorder(loop: loop)
        try Self.connect(engine, to: server, on: loop, recorder: recorder)
        try await eventually { recorder.state.withLock { $0.closedCalls } > 0 }
        let state = recorder.state.withLock { $0 }
        #expect(state.closedCalls == 1)
        guard case .some(let closed) = state.closed else { return }
        #expect(closed != nil, "a reset is a failure, not the server's clean close")
        #expect(state.received.count <= 1000)

        await engine.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// The server resets the connection while hookproxy still has bytes for it and holds reading: the failed write
    /// is reported at once, as a failure (NIO closes the channel on a write error without `errorCaught`).
    @Test func aFailedWriteIsReportedAsAFailureAtOnce() async throws {
        let held = HeldServer()
        let setup = try await Setup(threads: 1, held: held) { $0.setReading(false) }
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        // More than the two kernels' buffers take: a backlog stays in the channel.
        let waiting = try await loop.submit {
            var waiting = 0
            for _ in 0..<64 { waiting = connection.value.write(ByteBuffer(repeating: 1, count: 256 * 1024)) }
            return waiting
        }.get()
        #expect(waiting > 0)
        let child = try #require(held.child.withLock { $0 })
        try await child.eventLoop.submit {
            _ = (child as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
            child.close(promise: nil)
        }.get()
        try await eventually(timeout: .seconds(10)) { recorder.state.withLock { $0.closedCalls } > 0 }
        let state = recorder.state.withLock { $0 }
        #expect(state.closedCalls == 1)
        guard case .some(let closed) = state.closed else { return }
        #expect(closed != nil, "a write the server reset is a failure, not a clean close")
        try await setup.tearDown()
    }

    /// Writes 4 KiB at a time to a server that does not read until the socket takes no more; returns the backlog
    /// `write` then reports (under 4 KiB).
    static func writeUntilABacklog(_ connection: NIOLoopBound<UpstreamConnection>, on loop: any EventLoop) async throws -> Int {
        try await loop.submit { () -> Int in
            for _ in 0..<100_000 {
                let waiting = connection.value.write(ByteBuffer(repeating: 1, count: 4096))
                if waiting > 0 { return waiting }
            }
            return 0
        }.get()
    }

    /// `write` said bytes wait: `upstreamWritable` says when they are gone, however few they were (the curl
    /// carrier's contract), not only when NIO's write buffer crossed its high water mark.
    @Test func aSmallBacklogIsReportedGoneToo() async throws {
        let held = HeldServer()
        let setup = try await Setup(threads: 1, held: held)
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        #expect(try await loop.submit { connection.value.isCarriedByChannel }.get())

        let backlog = try await Self.writeUntilABacklog(connection, on: loop)
        #expect(backlog > 0 && backlog <= 4096)
        // The server reads everything: the backlog goes.
        let child = try #require(held.child.withLock { $0 })
        try await child.setOption(.autoRead, value: true).get()
        child.read()
        try await eventually { try await loop.submit { connection.value.bufferedBytes }.get() == 0 }
        try await eventually { recorder.state.withLock { $0.writableCalls } > 0 }
        #expect(recorder.state.withLock { $0.writableCalls } > 0, "the backlog write reported is gone: upstreamWritable")

        try await loop.submit { connection.value.close() }.get()
        try await setup.tearDown()
    }
    /// What `write` says still waits is exact whatever the pieces: the channel knows a flush sent everything from its
    /// writability alone only after a piece of two bytes or more queued onto an empty channel, and is asked otherwise
    /// (a 1-byte piece, a backlog left from before).
    @Test func theBacklogWriteReportsIsExactForPiecesOfAnySize() async throws {
        let held = HeldServer()
        let setup = try await Setup(threads: 1, held: held)
        let (loop, recorder) = (setup.loop, setup.recorder)
        let connection = try #require(recorder.connection)
        #expect(try await loop.submit { connection.value.isCarriedByChannel }.get())
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 2)) }.get() == 0)
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 1)) }.get() == 0)
        let backlog = try await Self.writeUntilABacklog(connection, on: loop)
        #expect(backlog > 0)
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 1)) }.get() == backlog + 1)
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 2)) }.get() == backlog + 3)
        // The server reads everything: the backlog goes, and a write after that is sent whole again.
        let child = try #require(held.child.withLock { $0 })
        try await child.setOption(.autoRead, value: true).get()
        child.read()
        try await eventually { recorder.state.withLock { $0.writableCalls } > 0 }
        #expect(try await loop.submit { connection.value.bufferedBytes }.get() == 0)
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 2)) }.get() == 0)
        #expect(try await loop.submit { connection.value.write(ByteBuffer(repeating: 1, count: 1)) }.get() == 0)

        try await loop.submit { connection.value.close() }.get()
        try await setup.tearDown()
    }

    /// A TLS connection (curl carries it) whose server stops reading: OpenSSL holds a record it could not send,
    /// and a retry must offer the same bytes at the same address. Small writes queued behind it must not be joined
    /// into the held piece (OpenSSL fails the retry: "bad write retry"); once the server reads, every byte arrives.
    @Test func smallWritesBehindAStalledTLSRecordAllArrive() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let ca = TestCA.shared
        let sink = try await TestTLSSink.start(tls: ca.identity([ca.leaf, ca.intermediate]), group: group)
        let engine = UpstreamEngine()
        let loop = group.next()
        let recorder = ConnectionRecorder(loop: loop)
        let head = RequestHead(method: "GET", url: try #require(ProxyURL(string: "https://localhost:\(sink.port)/")))
        let trust = TrustPolicy(rule: "test", allowInvalidCertificates: true)
        _ = engine.connect(UpstreamRequest(head: head, body: .none, settings: UpstreamSettings(), trust: trust),
                           delegate: recorder, on: loop)
        try await eventually(timeout: .seconds(30)) { recorder.connection != nil || recorder.state.withLock { $0.connectFailure } != nil }
        #expect(recorder.state.withLock { $0.connectFailure } == nil)
        let connection = try #require(recorder.connection)
        #expect(try await loop.submit { connection.value.isCarriedByChannel }.get() == false)

        // 4 KiB writes until the socket takes no more (curl_easy_send: CURLE_AGAIN), then small ones behind them.
        let written = try await loop.submit { () -> Int in
            var written = 0
            func piece(_ count: Int) -> ByteBuffer {
                defer { written += count }
                return ByteBuffer(bytes: (written..<(written + count)).map { UInt8($0 % 251) })
            }
            for _ in 0..<100_000 {
                if connection.value.write(piece(4096)) > 0 { break }
            }
            for _ in 0..<8 where connection.value.isOpen { connection.value.write(piece(100)) }
            return written
        }.get()
        #expect(recorder.state.withLock { $0.closedCalls } == 0, "\(String(describing: recorder.state.withLock { $0.closed }))")

        try await sink.release()
        try await eventually(timeout: .seconds(20)) { sink.received.count >= written || sink.closed }
        let received = sink.received
        #expect(received.count == written)
        let inOrder = received == (0..<written).map { UInt8($0 % 251) }
        #expect(inOrder, "every byte arrives, in order")
        #expect(recorder.state.withLock { $0.closedCalls } == 0)

        try await loop.submit { connection.value.close() }.get()
        await engine.shutdown()
        await sink.shutdown()
        try await group.shutdownGracefully()
    }
}
