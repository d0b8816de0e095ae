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
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        do {
            try easy.set(CURLOPT_URL, "http://\(target)/")
            try easy.set(CURLOPT_PROXY, proxy)
            try easy.set(CURLOPT_PROXYAUTH, hp_auth_any())
            try easy.set(CURLOPT_HTTPPROXYTUNNEL, true)
            try easy.set(CURLOPT_CONNECT_ONLY, 1)
            try easy.set(CURLOPT_NOSIGNAL, true)
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs)
        } catch {
            throw ProxyError(.internalError, "hookproxy: cannot set up a tunnel to \(target): \(error)")
        }
        let code = curl_easy_perform(easy.handle)
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
