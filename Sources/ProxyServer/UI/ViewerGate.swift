import Dispatch
import FoundationEssentials
import Glibc
import NIOHTTP1
import ProxyModel
import ProxyRules
import ProxyUI

/// Decides whether a request head is for the traffic viewer, and if so what it gets. Pure but for the API's store.
///
/// The viewer answers only origin-form requests whose `Host` names the listener (`RequestClassifier.isOwnAddress`,
/// port included): a proxied (absolute-form) request never reaches it. Then, in this order:
/// - the listener's port with another host name: 403 (a DNS-rebinding page must not read the API); a listener on
///   every address (0.0.0.0) also takes an IP literal (a browser on the LAN), never a name;
/// - `/ca.pem`: open, as before;
/// - `--proxy-auth`: the same credentials as HTTP Basic `Authorization`, else 401 `WWW-Authenticate: Basic` whose
///   body is the small onboarding page (so what it says stays open);
/// - `POST`: its `Origin` must be the listener's own (`http://` + the Host), else 403 (no cross-site clear);
/// - the route (`ViewerAPI`). No answer ever carries a CORS header.
enum ViewerGate {
    enum Decision {
        /// Not the viewer's: classify as before.
        case notViewer
        case answer(LocalResponse)
        /// `GET /api/events`: start the event stream at the request's end.
        case events
        /// An answer of the API, made at the request's end off the event loop (`queue`): a list with bodies
        /// serializes up to the store's whole byte budget, which would stall every connection of the loop.
        case deferred(@Sendable () -> LocalResponse)
        /// `GET /api/har`, `GET /api/flows`: the head, then the body made a part at a time on `queue`, each once the client took the
        /// last (`DownloadStream`): the whole file is never held, however slowly the client reads.
        case download(ResponseHead, FlowDownload)
    }

    /// Where the API's answers (and the parts of downloads) are made: one at a time, so however many are asked for
    /// at once, one answer or part is being built (its memory with it) while the proxy's event loops go on.
    static let queue = DispatchQueue(label: "hookproxy.viewer-api")
    /// Below this much in the store, every answer is quick: made on the loop, without the hop to `queue`.
    static let inlineBytes = 1 << 20

    static func decide(_ head: HTTPRequestHead, viewer: Viewer, listening: (host: String, port: Int)?,
                       credentials: ProxyCredentials?, ca: LazyCertificateAuthority) -> Decision {
        guard head.uri.hasPrefix("/"), head.method != .CONNECT, let listening,
              let hostHeader = head.headers.first(name: "host"),
              let (host, port) = ProxyURL.splitAuthority(Substring(hostHeader), defaultPort: 80),
              port == listening.port
        else { return .notViewer }
        guard isListener(host: host, port: port, listening: listening) else {
            return .answer(refusal(403, "hookproxy: this is hookproxy's own port, and Host '\(hostHeader.prefix(200))' names another host: refused (a page reached through another name must not read the traffic viewer)"))
        }
        let (path, query) = ProxyURL.splitTarget(Substring(head.uri))
        if path == "/ca.pem" { return .answer(OnboardingPage.response(for: path, ca: ca)) }
        if let credentials {
            let given = head.headers.first(name: "authorization")
            guard let given, ProxyAuth.matches(given, credentials) else {
                var page = OnboardingPage.response(for: "/", ca: ca)
                page.head.status = 401
                page.head.reason = "Unauthorized"
                page.head.headers.add("WWW-Authenticate", "Basic realm=\"hookproxy\", charset=\"UTF-8\"")
                return .answer(page)
            }
        }
        let method = head.method.rawValue
        if method == "POST" {
            let origin = head.headers.first(name: "origin")?.lowercased()
            guard origin == "http://" + hostHeader.lowercased() else {
                return .answer(refusal(403, "hookproxy: POST to the viewer needs the viewer's own Origin (http://\(hostHeader.prefix(200))), got \(origin.map { "'\($0.prefix(200))'" } ?? "none")"))
            }
        }
        // (The event stream and the downloads, the HAR and the flow list, make their parts on `queue` themselves.)
        if path != "/api/events", path != "/api/har", path != "/api/flows", path.hasPrefix("/api/"),
           viewer.store.bytes >= inlineBytes {
            let api = viewer.api
            return .deferred {
                switch api.answer(method: method, path: path, query: query) {
                case .response(let head, let body): LocalResponse(head: head, body: body)
                case .events, .download: LocalResponse.text(500, "hookproxy: internal error: a stream off /api/events, /api/har or /api/flows\n", headers: ViewerAnswer.commonHeaders)
                }
            }
        }
        switch viewer.api.answer(method: method, path: path, query: query) {
        case .events where method == "HEAD":
            var headers: HeaderFields = [("Content-Type", "text/event-stream")]
            for (name, value) in ViewerAnswer.commonHeaders { headers.add(name, value) }
            return .answer(LocalResponse(head: ResponseHead(status: 200, headers: headers), body: []))
        case .events:
            return .events
        case .response(let head, let body):
            return .answer(LocalResponse(head: head, body: body))
        case .download(let head, _) where method == "HEAD":
            return .answer(LocalResponse(head: head, body: []))
        case .download(let head, let download):
            return .download(head, download)
        }
    }

    /// Whether `host` names the listener: its address or a loopback spelling (`RequestClassifier.isOwnAddress`), or,
    /// on a listener bound to every address (0.0.0.0, ::), any IP literal — the address a LAN browser used. Never
    /// another DNS name: DNS rebinding always comes with one.
    static func isListener(host: String, port: Int, listening: (host: String, port: Int)) -> Bool {
        if RequestClassifier.isOwnAddress(ProxyURL(scheme: "http", host: host, port: port, path: "/"), listening: listening) {
            return true
        }
        guard RequestClassifier.isAnyAddress(listening.host) else { return false }
        var v4 = in_addr(), v6 = in6_addr()
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return inet_pton(AF_INET, bare, &v4) == 1 || inet_pton(AF_INET6, bare, &v6) == 1
    }

    static func refusal(_ status: Int, _ message: String) -> LocalResponse {
        .text(status, message + "\n", headers: ViewerAnswer.commonHeaders)
    }
}
