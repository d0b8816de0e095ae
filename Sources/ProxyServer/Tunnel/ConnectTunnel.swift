import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyModel
import ProxyRules
import ProxyUpstream

/// `CONNECT host:port`: opens a TCP connection to the target, answers 200, and splices the two connections.
/// A failed connect answers 502 naming the target and the reason. Runs on the client connection's event loop.
enum ConnectTunnel {
    static func open(request: RequestContext, handler: ProxyRequestHandler, context: ChannelHandlerContext) {
        let target = request.head.uri
        let proxy = handler.proxy
        guard let (host, port) = ProxyURL.splitAuthority(Substring(target), defaultPort: 443), target.contains(":") || target.hasPrefix("[") else {
            handler.answerConnect(ProxyError(.badRequest, "hookproxy: bad request: CONNECT target must be host:port, got '\(target.prefix(200))'"),
                                  request: request)
            return
        }
        if let listening = proxy.listeningAddress, port == listening.port,
           RequestClassifier.isOwnAddress(ProxyURL(scheme: "http", host: host, port: port), listening: listening) {
            handler.answerConnect(ProxyError(.loopDetected, "hookproxy: loop detected: CONNECT \(target.prefix(200)) is hookproxy itself"),
                                  request: request)
            return
        }
        if proxy.intercepts(host: host, port: port) {
            // TLS and the HTTP handlers inside it do not carry a half-close: the client's end of input closes.
            guard ClientEndOfInput.abandon(context.channel) else { return }
            Interception.start(host: host, request: request, handler: handler, context: context)
            return
        }
        warnIfTrustCannotApply(host: host, port: port, proxy: proxy)
        let started = ContinuousClock.now
        connect(host: host, port: port, proxy: proxy, client: context.channel)
            .assumeIsolated().whenComplete { result in
                switch result {
                case .success(let upstream) where isSelf(upstream, proxy: proxy):
                    // a name that resolved to the listener: never a tunnel to itself
                    upstream.close(promise: nil)
                    handler.answerConnect(ProxyError(.loopDetected, "hookproxy: loop detected: CONNECT \(target.prefix(200)) reaches hookproxy itself"),
                                          request: request)
                case .success(let upstream):
                    splice(client: context, upstream: upstream, handler: handler, target: target)
                case .failure(let error):
                    let failure = error as? ProxyError
                        ?? ProxyError(.connectFailed, "hookproxy: cannot connect to \(target): \(error)")
                    proxy.logger.warning("CONNECT \(target): \(failure.message) after \(ContinuousClock.now - started)")
                    handler.answerConnect(failure, request: request)
                }
            }
    }

    /// Whether a fresh connection reached this proxy's own listener: the listening port, on the listening address or
    /// on the machine's own address (a connection to a local address has the same address at both ends).
    private static func isSelf(_ upstream: any Channel, proxy: ProxyContext) -> Bool {
        guard let remote = upstream.remoteAddress, remote.port == proxy.listeningPort.load(ordering: .relaxed) else {
            return false
        }
        if RequestClassifier.isAnyAddress(proxy.listeningHost) {
            return remote.ipAddress == upstream.localAddress?.ipAddress
        }
        return remote.ipAddress == proxy.listeningHost
            || (proxy.listeningHost == "localhost" && RequestClassifier.isLoopback(remote.ipAddress ?? ""))
    }

    /// A TCP connection to the target: direct, or through `--upstream-proxy` (set up by libcurl off the loop).
    private static func connect(host: String, port: Int, proxy: ProxyContext, client: any Channel) -> EventLoopFuture<any Channel> {
        let eventLoop = client.eventLoop
        let connectTimeout = TimeAmount.milliseconds(Int64(proxy.configuration.upstream.connectTimeoutMs))
        @Sendable func bootstrap() -> ClientBootstrap {
            ClientBootstrap(group: eventLoop)
                .connectTimeout(connectTimeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelOption(.autoRead, value: false)
                // The upstream's end of input is passed on to the client as a half-close (GlueHandler).
                .channelOption(.allowRemoteHalfClosure, value: true)
        }
        guard proxy.configuration.upstream.upstreamProxy != nil else {
            // An IP literal needs no lookup; a name is looked up beside other tunnels' lookups (TunnelResolver),
            // not behind them, and a lookup still queued when its client leaves is dropped.
            if let address = try? SocketAddress(ipAddress: host, port: port) {
                return bootstrap().connect(to: address)
            }
            let resolver = TunnelResolver(loop: eventLoop)
            client.closeFuture.whenComplete { _ in resolver.cancelQueries() }
            return bootstrap().resolver(resolver).connect(host: host, port: port)
        }
        let settings = proxy.configuration.upstream
        return proxy.connectPool.pool.runIfActive(eventLoop: eventLoop) {
            try TunnelConnector.open(host: host, port: port, settings: settings)
        }.flatMap { socket in
            bootstrap().withConnectedSocket(socket)
        }
    }

    private static func splice(client: ChannelHandlerContext, upstream: any Channel, handler: ProxyRequestHandler, target: String) {
        handler.becomeTunnelAfter200(install: { pipeline in
            let halfOpenLimit = TimeAmount.milliseconds(Int64(handler.proxy.limits.clientIdleTimeoutMs))
            let (local, remote) = GlueHandler.matchedPair(halfOpenLimit: halfOpenLimit)
            try upstream.pipeline.syncOperations.addHandler(remote)
            // SPEC: the idle timeout does not apply to a CONNECT tunnel.
            if let idle = try? pipeline.handler(type: IdleWatch.self) { pipeline.removeHandler(idle, promise: nil) }
            try pipeline.addHandler(local)
            // The upstream was connected with autoRead off so nothing is read before the glue is in place;
            // turning it on now issues the first read and keeps reading (each read gated by the glue).
            try upstream.syncOptions?.setOption(.autoRead, value: true)
        }, done: { result in
            switch result {
            case .success:
                // After the bytes the request decoder held: an end of input that came with them follows them.
                ClientEndOfInput.release(client.channel)
                client.channel.read()
            case .failure(let failure):
                if let error = failure.error { handler.proxy.logger.error("CONNECT \(target): cannot splice: \(error)") }
                upstream.close(promise: nil)
                client.close(promise: nil)
            }
        })
    }

    /// A `trust` rule for a host reached through a blind tunnel cannot apply (hookproxy is not the TLS client):
    /// said once per host.
    private static func warnIfTrustCannotApply(host: String, port: Int, proxy: ProxyContext) {
        let probe = RequestHead(method: "GET", url: ProxyURL(scheme: "https", host: host, port: port))
        guard let trust = proxy.currentRules.plan(for: probe).trust else { return }
        let first = proxy.blindTunnelTrustWarnings.withLock { $0.insert(host.lowercased()).inserted }
        if first {
            proxy.logger.warning("trust rule '\(trust.rule)' cannot apply to \(host):\(port): the client's CONNECT is a blind tunnel (hookproxy is not the TLS client); intercept the host (--intercept or intercept: true) to apply it")
        }
    }
}
