import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyLog
import ProxyModel
import ProxyUpstream
import Synchronization

/// A running hookproxy listener: accepts client connections and serves them until `shutdown`.
///
/// `start` binds and returns once listening; `shutdown` stops accepting, lets exchanges in flight finish within the
/// grace period, then closes every connection, stops the upstream engine and closes the logs.
public final class ProxyServer: Sendable {
    let context: ProxyContext  // (internal: tests read the open client channels)
    private let group: MultiThreadedEventLoopGroup
    /// Set by `endGracePeriod`: `shutdown` stops waiting for exchanges in flight.
    private let graceEnded = Atomic<Bool>(false)
    private let serverChannel: any Channel

    /// The address actually bound (port 0 resolved).
    public let host: String
    public let port: Int

    public static func start(_ requested: ProxyConfiguration) async throws -> ProxyServer {
        var configuration = requested
        let budget = FileDescriptorBudget.plan(limit: FileDescriptorBudget.raiseLimit(),
                                               maxConnections: configuration.limits.maxConnections,
                                               maxCachedConnections: configuration.upstream.maxCachedConnections)
        if let refusal = budget.refusal { throw ProxyStartError(refusal) }
        configuration.limits.maxConnections = budget.maxConnections
        configuration.upstream.maxCachedConnections = budget.maxCachedConnections
        if let warning = budget.warning { configuration.logger.warning("\(warning)") }
        let viewer = configuration.viewer.map(Viewer.init(settings:))
        if let viewer {
            // The viewer's store is fed the very records the log writers get, bodies captured for it too.
            configuration.recorder = MultiRecorder([configuration.recorder, viewer.store].compactMap { $0 })
            configuration.captureBodies = true
        }
        let context = ProxyContext(configuration: configuration, viewer: viewer)
        do {
            try context.certificateAuthority.loadIfPresent()
        } catch {
            await context.engine.shutdown()
            try? await context.shutdownPools()
            throw ProxyStartError(error.description)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoops))
        let channel: any Channel
        do {
            // Each loop's upstream engine is made now: made at a loop's first request, it could meet a process
            // out of descriptors.
            try context.engine.prepare(Array(group.makeIterator()))
            channel = try await makeBootstrap(group: group)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try ProxyPipeline.configure(channel, context: context)
                    }
                }
                .bind(host: configuration.host, port: configuration.port).get()
        } catch {
            await context.engine.shutdown()
            try? await context.shutdownPools()
            try? await group.shutdownGracefully()
            if let error = error as? ProxyError { throw ProxyStartError(error.message) }
            throw ProxyStartError("hookproxy: cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        let port = channel.localAddress?.port ?? configuration.port
        context.listeningPort.store(port, ordering: .relaxed)
        let reverse: [ReverseListener]
        do throws(ProxyStartError) {
            reverse = try await ReverseListeners.bind(
                configuration.reverseRoutes, certificatePath: configuration.reverseCertificatePath, context: context,
                eventLoop: group.next(), bootstrap: { makeBootstrap(group: group) })
        } catch {
            try? await channel.close()
            await context.engine.shutdown()
            try? await context.shutdownPools()
            try? await group.shutdownGracefully()
            throw error
        }
        return ProxyServer(context: context, group: group, serverChannel: channel, host: configuration.host, port: port,
                           reverseListeners: reverse)
    }

    /// The bootstrap every listener shares (the proxy's own and the `--reverse` ones); the caller adds the child
    /// channel initializer.
    private static func makeBootstrap(group: MultiThreadedEventLoopGroup) -> ServerBootstrap {
        ServerBootstrap(group: group)
            // Out of file descriptors, accept(2) fails at once, again and again: back off instead of spinning a core.
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptBackoff())
                }
            }
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // TCP_NODELAY is set on every accepted socket (what NIO sets on the listener does not reach them:
            // ClientSocketOptionsTests). 4 reads per wake-up is NIO's default, so it is not set again: each option
            // applied costs every new connection NIO's option machinery.
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    }

    private init(context: ProxyContext, group: MultiThreadedEventLoopGroup, serverChannel: any Channel, host: String, port: Int,
                 reverseListeners: [ReverseListener]) {
        self.context = context
        self.group = group
        self.serverChannel = serverChannel
        self.host = host
        self.port = port
        self.reverseListeners = reverseListeners
    }

    /// The traffic viewer (its flow store), unless the configuration turned it off.
    public var viewer: Viewer? { context.viewer }
    /// What HTTP/2 upstream responses hold now, together, for clients that read slowly (tests, diagnostics).
    public var multiplexedBacklogBytes: Int { context.multiplexedBacklog.bytes }

    /// The `--reverse` listeners, bound, in the order of the configuration's routes.
    public let reverseListeners: [ReverseListener]

    /// Upstream requests carried so far, and the connections they opened (the rest reused one).
    public var upstreamStatistics: UpstreamStatistics { context.engine.statistics }

    /// Leaves signed so far for interception (a repeated host costs none).
    public var interceptionSignings: Int { context.interception.signings }

    /// Hosts whose certificate a client refused (interception), as the log lists them at shutdown (tests).
    public var interceptionRefusals: [String] { context.interceptionRefusals.withLock { $0 } }

    /// Client connections open now (tests).
    public var openConnections: Int { context.connections.openChannels.count }

    /// The interception CA, created now if it does not exist yet.
    public func certificateAuthority() throws(CAError) -> CertificateAuthority { try context.certificateAuthority.get() }

    /// `http://HOST:PORT`, as printed on the listening line.
    public var url: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "http://\(shownHost):\(port)"
    }

    /// Ends `shutdown`'s grace period now (a second SIGINT/SIGTERM): exchanges still in flight are cut off, the logs
    /// are still flushed and closed. Any thread.
    public func endGracePeriod() { graceEnded.store(true, ordering: .relaxed) }

    /// Stops accepting, waits up to the grace period for exchanges in flight, closes everything. Call once.
    public func shutdown() async {
        try? await serverChannel.close()
        for listener in reverseListeners { try? await listener.channel.close() }
        // HTTP/2 clients get GOAWAY (NIOHTTP2ServerConnectionManagementHandler answers the event); others ignore it.
        for channel in context.connections.openChannels {
            channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
        let deadline = ContinuousClock.now + .milliseconds(context.limits.shutdownGraceMs)
        var inGrace: Bool { ContinuousClock.now < deadline && !graceEnded.load(ordering: .relaxed) }
        if let viewer = context.viewer {
            // Event streams end cleanly (their last chunk written) before connections are closed.
            viewer.store.close()
            while viewer.store.watcherCount > 0 && inGrace {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        while context.connections.exchangesInFlight > 0 && inGrace {
            try? await Task.sleep(for: .milliseconds(20))
        }
        context.connections.cutOffForShutdown()
        // All closes asked for at once, then waited for (one at a time, each waited for a hop to its loop).
        let closing = context.connections.openChannels.map { $0.close() }
        for closed in closing { try? await closed.get() }
        await context.engine.shutdown()
        let upstream = context.engine.statistics
        if upstream.transfers > 0 {
            let reused = (upstream.reuseRate * 1000).rounded() / 10
            let unconnected = upstream.unconnected > 0 ? ", \(upstream.unconnected) never connected" : ""
            let byThread = upstream.threadWakeups > 0 ? " (\(upstream.threadWakeups) through the watcher thread)" : ""
            context.logger.info("""
                upstream: \(upstream.transfers) requests, \(upstream.newConnections) new connections (\(reused)% reused one)\(unconnected); \
                \(upstream.readySockets) socket events, \(upstream.wakeups) of them woke a sleeping event loop\(byThread)
                """)
        }
        try? await context.shutdownPools()
        context.configuration.recorder?.close()
        let refused = context.interceptionRefusals.withLock { $0 }
        if !refused.isEmpty {
            context.logger.warning("clients refused hookproxy's certificate (interception) for: \(refused.joined(separator: ", "))")
        }
        try? await group.shutdownGracefully()
    }
}

/// Binding failed: the message says where and why.
public struct ProxyStartError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
