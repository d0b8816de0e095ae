internal import CCurl
import Foundation
import ProxyModel

/// Opens a TCP tunnel to `host:port` through the upstream proxy with libcurl (CONNECT, answering the proxy's 407
/// with the credentials in its URL, any scheme libcurl supports) and hands back a socket the caller owns.
/// Blocking: call it from a thread pool, never from an event loop.
public enum TunnelConnector {
    public static func open(host: String, port: Int, settings: UpstreamSettings) throws(ProxyError) -> Int32 {
        guard let proxy = settings.upstreamProxy else {
            throw ProxyError(.internalError, "hookproxy: no upstream proxy configured")
        }
        let easy = CurlEasy()
        let deadline = Unmanaged.passRetained(SetupDeadline(after: settings.connectTimeoutMs))
        defer { deadline.release() }
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        do {
            try easy.set(CURLOPT_URL, "http://\(target)/")
            try easy.set(CURLOPT_PROXY, proxy)
            try easy.set(CURLOPT_PROXYAUTH, hp_auth_any())
            try easy.set(CURLOPT_HTTPPROXYTUNNEL, true)
            try easy.set(CURLOPT_CONNECT_ONLY, 1)
            try easy.set(CURLOPT_NOSIGNAL, true)
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs)
            // libcurl 7.88 checks no timeout while it reads the body of the proxy's 407 (to keep the connection for
            // a second round), so one whose body never ends held the tunnel, and a thread of the connect pool, for
            // good. Its progress callback still runs: past the connect timeout it ends the set-up.
            try easy.set(CURLOPT_NOPROGRESS, false)
            try easy.set(CURLOPT_XFERINFODATA, pointer: deadline.toOpaque())
            try easy.setProgressCallback({ context, _, _, _, _ in
                Unmanaged<SetupDeadline>.fromOpaque(context!).takeUnretainedValue().passed ? 1 : 0
            })
        } catch {
            throw ProxyError(.internalError, "hookproxy: cannot set up a tunnel to \(target): \(error)")
        }
        let code = curl_easy_perform(easy.handle)
        if code == CURLE_ABORTED_BY_CALLBACK {
            throw ProxyError(.timeout, "hookproxy: connect timeout \(target) through the upstream proxy: no tunnel after \(settings.connectTimeoutMs) ms (--connect-timeout)")
        }
        guard code == CURLE_OK else {
            let status = easy.info(CURLINFO_HTTP_CONNECTCODE) ?? 0
            let reason = String(cString: curl_easy_strerror(code)) + (status > 0 ? " (upstream proxy answered \(status))" : "")
            throw ProxyError(.connectFailed, "hookproxy: cannot connect to \(target) through the upstream proxy: \(reason)")
        }
        var socket: curl_socket_t = -1
        guard hp_getinfo_socket(easy.handle, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else {
            throw ProxyError(.connectFailed, "hookproxy: the tunnel to \(target) has no socket")
        }
        let owned = dup(socket)  // curl closes its own descriptor with the handle
        guard owned >= 0 else { throw ProxyError(.connectFailed, "hookproxy: cannot take over the tunnel to \(target)") }
        return owned
    }
}

/// When a tunnel's set-up must be over (its connect timeout from now). Read from curl's progress callback.
private final class SetupDeadline {
    private let end: ContinuousClock.Instant

    init(after milliseconds: Int) {
        end = .now + .milliseconds(milliseconds)
    }

    var passed: Bool { ContinuousClock.now > end }
}
