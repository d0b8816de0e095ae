import ProxyModel
import ProxyRules

/// What a request to hookproxy's own address gets: a small page, never a forward (which would loop).
enum OnboardingPage {
    static func response(for path: String) -> LocalResponse {
        let html = """
            <!doctype html>
            <html><head><meta charset="utf-8"><title>hookproxy</title></head>
            <body>
            <h1>hookproxy \(HookproxyVersion.current)</h1>
            <p>This is the proxy itself. Point your client's HTTP proxy setting here.</p>
            <p>To inspect HTTPS, trust the CA certificate: <a href="/ca.pem">/ca.pem</a>.</p>
            </body></html>

            """
        return .text(200, html, contentType: "text/html; charset=utf-8")
    }
}
