internal import CCurl
import ProxyModel

/// A failure that is `--upstream-proxy`'s own (the proxy cannot be reached, refused or never finished a CONNECT,
/// timed out, asked for credentials forever), in words that name the proxy, so the user looks there and not at the
/// server they asked for: `hookproxy: cannot connect to upstream proxy 127.0.0.1:3128 (for example.com:443): …`.
enum UpstreamProxyFailure {
    /// - Parameters:
    ///   - connectCode: the proxy's answer to the CONNECT (0 when there was none).
    ///   - target: the server the request was for (`host[:port]`).
    static func error(_ code: CURLcode, reason: String, connectCode: Int, settings: UpstreamSettings,
                      target: String) -> ProxyError {
        let proxy = settings.upstreamProxyName ?? "?"
        if connectCode > 0, !(200..<300).contains(connectCode) {
            let hint = connectCode != 407 ? ""
                : settings.upstreamProxyHasCredentials ? " (it did not accept the credentials in --upstream-proxy)"
                : " (it wants credentials: --upstream-proxy http://USER:PASS@\(proxy))"
            return ProxyError(.upstreamFailed, "hookproxy: upstream proxy \(proxy) refused CONNECT \(target): it answered \(connectCode)\(hint)")
        }
        let (kind, what): (ProxyError.Kind, String)
        switch code {
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST: (kind, what) = (.dnsFailed, "DNS failure")
        case CURLE_OPERATION_TIMEDOUT: (kind, what) = (.timeout, "connect timeout")
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: (kind, what) = (.upstreamClosed, "connection closed by")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE:
            (kind, what) = (.tlsFailed, "TLS failure")
        case CURLE_COULDNT_CONNECT: (kind, what) = (.connectFailed, "cannot connect to")
        default: (kind, what) = (.connectFailed, "cannot tunnel through")
        }
        return ProxyError(kind, "hookproxy: \(what) upstream proxy \(proxy) (for \(target)): \(reason)")
    }

    /// The proxy asked for credentials once more after `CurlTransfer.maxAuthRounds` answers.
    static func challengeFailed(_ heads: ProxyConnectHeads, settings: UpstreamSettings, target: String) -> ProxyError {
        ProxyError(.upstreamFailed, "hookproxy: challenge failed upstream proxy \(settings.upstreamProxyName ?? "?") (for \(target)): \(heads.stopReason)")
    }
}

extension UpstreamSettings {
    /// `--upstream-proxy` as messages name it: `host:port`, never its credentials (curl's default port when the URL
    /// gives none: 1080, or 443 for an https proxy). nil without an upstream proxy.
    public var upstreamProxyName: String? {
        guard let url = upstreamProxy, !url.isEmpty else { return nil }
        var rest = Substring(url)
        var defaultPort = 1080
        if let schemeEnd = rest.firstRange(of: "://") {
            if rest[..<schemeEnd.lowerBound].lowercased() == "https" { defaultPort = 443 }
            rest = rest[schemeEnd.upperBound...]
        }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        let hasPort = rest.hasPrefix("[") ? rest.contains("]:") : rest.contains(":")
        return hasPort ? String(rest) : "\(rest):\(defaultPort)"
    }

    /// Whether the `--upstream-proxy` URL carries credentials (userinfo).
    var upstreamProxyHasCredentials: Bool {
        guard let url = upstreamProxy, let schemeEnd = url.firstRange(of: "://") else { return false }
        let authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return authority.contains("@")
    }
}
