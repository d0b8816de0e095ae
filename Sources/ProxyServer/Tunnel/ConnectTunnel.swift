import NIOCore
import NIOHTTP1
import NIOPosix
import ProxyModel
import ProxyRules

/// `CONNECT host:port`: opens a TCP connection to the target, answers 200, and splices the two connections.
/// A failed connect answers 502 naming the target and the reason. Runs on the client connection's event loop.
enum ConnectTunnel {
    static func open(target: String, handler: ProxyRequestHandler, context: ChannelHandlerContext) {
        let proxy = handler.proxy
        guard let (host, port) = ProxyURL.splitAuthority(Substring(target), defaultPort: 443), target.contains(":") || target.hasPrefix("[") else {
            answer(.text(400, "hookproxy: bad request: CONNECT target must be host:port, got '\(target.prefix(200))'\n"),
                   handler: handler, close: true)
            return
        }
        let started = ContinuousClock.now
        ClientBootstrap(group: context.eventLoop)
            .connectTimeout(.milliseconds(Int64(proxy.configuration.upstream.connectTimeoutMs)))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.autoRead, value: false)
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let upstream):
                    splice(client: context, upstream: upstream, handler: handler, target: target)
                case .failure(let error):
                    let message = "hookproxy: cannot connect to \(target): \(error)"
                    proxy.logger.warning("CONNECT \(target): \(error) after \(ContinuousClock.now - started)")
                    answer(.text(502, message + "\n"), handler: handler, close: true)
                }
            }
    }

    private static func splice(client: ChannelHandlerContext, upstream: any Channel, handler: ProxyRequestHandler, target: String) {
        let head = HTTPResponseHead(version: .http1_1, status: .init(statusCode: 200, reasonPhrase: "Connection Established"))
        handler.send(.head(head))
        handler.sendEnd().whenComplete { result in
            guard case .success = result else {
                upstream.close(promise: nil)
                return
            }
            do {
                let (local, remote) = GlueHandler.matchedPair()
                try handler.removeHTTPHandlers()
                try client.pipeline.syncOperations.addHandler(local)
                try upstream.pipeline.syncOperations.addHandler(remote)
                // The upstream was connected with autoRead off so nothing is read before the glue is in place;
                // turning it on now issues the first read and keeps reading (each read gated by the glue).
                try upstream.syncOptions?.setOption(.autoRead, value: true)
                client.channel.read()
            } catch {
                handler.proxy.logger.error("CONNECT \(target): cannot splice: \(error)")
                upstream.close(promise: nil)
                client.close(promise: nil)
            }
        }
    }

    private static func answer(_ response: LocalResponse, handler: ProxyRequestHandler, close: Bool) {
        var head = response.head
        if close { head.headers.set("Connection", "close") }
        handler.send(.head(head.nioHead(version: .http1_1)))
        handler.sendBodyBelowEncoder(response.body)
        handler.sendEnd().whenComplete { _ in if close { handler.closeConnection() } }
    }
}
