internal import CCurl
import Glibc
import ProxyModel

/// Opens a TCP tunnel to `host:port` through the upstream proxy with libcurl (CONNECT, answering the proxy's 407
/// with the credentials in its URL, any scheme libcurl supports) and hands back a socket the caller owns. Every
/// failure here is the upstream proxy's (nothing reached the target yet), and its message names the proxy.
/// Blocking: call it from a thread pool, never from an event loop.
public enum TunnelConnector {
    public static func open(host: String, port: Int, settings: UpstreamSettings) throws(ProxyError) -> Int32 {
        guard let proxy = settings.upstreamProxy else {
            throw ProxyError(.internalError, "hookproxy: no upstream proxy configured")
        }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: hp_error_size() + 1)
        errorBuffer.initialize(repeating: 0, count: hp_error_size() + 1)
        defer { errorBuffer.deallocate() }
        let easy = CurlEasy()
        let setup = Unmanaged.passRetained(TunnelSetup(after: settings.connectTimeoutMs))
        defer { setup.release() }
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        do {
            try easy.set(CURLOPT_URL, "http://\(target)/")
            try easy.set(CURLOPT_PROXY, proxy)
            try easy.set(CURLOPT_PROXYAUTH, hp_auth_any())
            try easy.set(CURLOPT_HTTPPROXYTUNNEL, true)
            try easy.set(CURLOPT_CONNECT_ONLY, 1)
            try easy.set(CURLOPT_NOSIGNAL, true)
            try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs)
            // libcurl 7.88 checks no timeout while it reads the body of the proxy's 407 (to keep the connection for
            // a second round), so one whose body never ends held the tunnel, and a thread of the connect pool, for
            // good. Its progress callback still runs: past the connect timeout it ends the set-up.
            try easy.set(CURLOPT_NOPROGRESS, false)
            try easy.set(CURLOPT_XFERINFODATA, pointer: setup.toOpaque())
            try easy.setProgressCallback({ context, _, _, _, _ in
                Unmanaged<TunnelSetup>.fromOpaque(context!).takeUnretainedValue().passed ? 1 : 0
            })
            // The proxy's answers to the CONNECT, counted: a 407 that calls every Digest nonce stale ends after
            // `CurlTransfer.maxAuthRounds` answers instead of thousands of CONNECTs.
            try easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, false)
            try easy.set(CURLOPT_HEADERFUNCTION, callback: { buffer, size, count, context in
                let setup = Unmanaged<TunnelSetup>.fromOpaque(context!).takeUnretainedValue()
                let line = UnsafeRawBufferPointer(start: buffer, count: size * count)
                return setup.heads.feed(line) ? line.count : 0  // 0: curl ends the transfer with CURLE_WRITE_ERROR
            })
            try easy.set(CURLOPT_HEADERDATA, pointer: setup.toOpaque())
        } catch {
            throw ProxyError(.internalError, "hookproxy: cannot set up a tunnel to \(target): \(error)")
        }
        let code = curl_easy_perform(easy.handle)
        defer { withExtendedLifetime(easy) {} }  // curl writes into errorBuffer until the handle is gone
        let proxyName = settings.upstreamProxyName ?? proxy
        if code == CURLE_ABORTED_BY_CALLBACK {
            throw ProxyError(.timeout, "hookproxy: connect timeout upstream proxy \(proxyName) (for \(target)): no tunnel after \(settings.connectTimeoutMs) ms (--connect-timeout)")
        }
        if code == CURLE_WRITE_ERROR {
            throw UpstreamProxyFailure.challengeFailed(setup.takeUnretainedValue().heads, settings: settings, target: target)
        }
        guard code == CURLE_OK else {
            let reason = errorBuffer[0] == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorBuffer)
            throw UpstreamProxyFailure.error(code, reason: reason, connectCode: easy.info(CURLINFO_HTTP_CONNECTCODE) ?? 0,
                                             settings: settings, target: target)
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

/// One tunnel's set-up: when it must be over (its connect timeout from now), read from curl's progress callback,
/// and the proxy's answers so far, fed by its header callback. The calling thread only.
private final class TunnelSetup {
    private let end: ContinuousClock.Instant
    var heads = ProxyConnectHeads()

    init(after milliseconds: Int) {
        end = .now + .milliseconds(milliseconds)
    }

    var passed: Bool { ContinuousClock.now > end }
}
