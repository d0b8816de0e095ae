import NIOCore
import NIOPosix
import NIOSSL

/// A bound `--reverse` listener: where it listens (port 0 resolved) and where it forwards.
public struct ReverseListener: Sendable {
    public let route: ReverseRoute
    /// The address actually bound.
    public let host: String
    public let port: Int
    let channel: any Channel

    /// `http(s)://HOST:PORT` of the listener, as clients reach it.
    public var url: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(route.tls ? "https" : "http")://\(shownHost):\(port)"
    }

    /// The line printed at start, after the proxy's own listening line: `hookproxy reverse URL → TARGET`.
    public var startLine: String { "hookproxy reverse \(url) → \(route.target)" }
}

/// Binds the `--reverse` listeners of a starting proxy. Each accepted connection gets the proxy's pipeline (same
/// limits, timeouts and request handler), behind a TLS server handler when the route speaks TLS, with the route as
/// the handler's fixed target.
enum ReverseListeners {
    static func bind(_ routes: [ReverseRoute], certificatePath: String?, context: ProxyContext,
                     eventLoop: any EventLoop, bootstrap makeBootstrap: () -> ServerBootstrap) async throws(ProxyStartError) -> [ReverseListener] {
        let tlsRoutes = routes.filter(\.tls)
        var sharedCertificate: NIOSSLContext?
        if let certificatePath, !tlsRoutes.isEmpty {
            do throws(ReverseCertificateError) {
                sharedCertificate = try ReverseCertificate.serverContext(path: certificatePath)
            } catch {
                throw ProxyStartError(error.description)
            }
        }
        var bound: [ReverseListener] = []
        do throws(ProxyStartError) {
            for route in routes {
                let tls = route.tls ? try await serverContext(for: route, shared: sharedCertificate, context: context, eventLoop: eventLoop) : nil
                bound.append(try await bind(route, tls: tls, context: context, bootstrap: makeBootstrap()))
            }
        } catch {
            for listener in bound { try? await listener.channel.close() }
            throw error
        }
        return bound
    }

    /// The `--reverse-cert` context, or one presenting a leaf minted now by the CA for the route's host (a client
    /// whose SNI names another host gets a leaf for that name, as on intercepted tunnels).
    private static func serverContext(for route: ReverseRoute, shared: NIOSSLContext?,
                                      context: ProxyContext, eventLoop: any EventLoop) async throws(ProxyStartError) -> NIOSSLContext {
        if let shared { return shared }
        do {
            return try await context.interception.context(for: route.target.host, on: eventLoop).get()
        } catch {
            throw ProxyStartError("hookproxy: --reverse \(route.text): cannot mint a certificate for \(route.target.host): \(error)")
        }
    }

    private static func bind(_ route: ReverseRoute, tls: NIOSSLContext?, context: ProxyContext,
                             bootstrap: ServerBootstrap) async throws(ProxyStartError) -> ReverseListener {
        let channel: any Channel
        do {
            channel = try await bootstrap
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try ProxyPipeline.configure(channel, context: context, reverse: route, tls: tls)
                    }
                }
                .bind(host: route.listenHost, port: route.listenPort).get()
        } catch {
            throw ProxyStartError("hookproxy: --reverse \(route.text): cannot listen on \(route.listenHost):\(route.listenPort): \(error)")
        }
        let port = channel.localAddress?.port ?? route.listenPort
        context.addOwnPort(port)
        return ReverseListener(route: route, host: route.listenHost, port: port, channel: channel)
    }
}
