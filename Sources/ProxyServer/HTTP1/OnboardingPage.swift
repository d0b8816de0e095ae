import FoundationEssentials
import Glibc
import ProxyModel
import ProxyRules

/// What a request to hookproxy's own address gets: a small page, never a forward (which would loop).
enum OnboardingPage {
    static func response(for path: String, ca: LazyCertificateAuthority) -> LocalResponse {
        if path == "*" {
            // `OPTIONS *` to hookproxy itself: what it accepts (every method goes through; CONNECT opens tunnels).
            return .text(200, "", headers: [("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT")])
        }
        if path == "/api" || path.hasPrefix("/api/") {
            // the viewer's API (off, or asked for through the proxy): not here
            return .text(404, "hookproxy: no traffic viewer API here (it is off with --no-ui, and served only to requests addressed to hookproxy itself, not through it)\n")
        }
        if path == "/ca.pem" {
            do {
                let authority = try ca.get()
                return .text(200, authority.certificatePEM, headers: [("Content-Disposition", "attachment; filename=\"hookproxy-ca.pem\"")],
                             contentType: "application/x-pem-file")
            } catch {
                return .error(ProxyError(.internalError, error.description))
            }
        }
        let html = """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>hookproxy</title></head>
            <body>
            <h1>hookproxy \(HookproxyVersion.current)</h1>
            <p>This is the proxy itself. Point your client's HTTP proxy setting here.</p>
            <p>To inspect HTTPS, trust the CA certificate: <a href="/ca.pem">/ca.pem</a>
            (for example <code>curl --cacert hookproxy-ca.pem</code>, <code>REQUESTS_CA_BUNDLE</code> for Python,
            <code>NODE_EXTRA_CA_CERTS</code> for Node, or <code>update-ca-certificates</code> on Debian).</p>
            </body></html>

            """
        return .text(200, html, contentType: "text/html; charset=utf-8")
    }
}
