import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

/// Issue 11, item 15: secrets are masked by position (a header value or a word of it, a URL's userinfo), never as
/// a substring of longer text; rule secrets from `${VAR}` are masked; `--redact-query` and userinfo masking reach
/// Location, Referer and the URLs inside events and errors.
@Suite struct RedactionPositionTests {
    static func flow(url: String = "http://example.com/p/t?x=t", requestHeaders: HeaderFields = [],
                     responseHeaders: HeaderFields = [], responseBody: String? = nil, events: [HookEvent] = [],
                     error: String? = nil, secrets: [String] = []) -> FlowRecord {
        FlowRecord(
            id: 1, start: Samples.start, client: "127.0.0.1:50001",
            request: Samples.head("GET", url, requestHeaders), url: url, upstreamURL: url,
            response: ResponseHead(status: 302, headers: responseHeaders),
            responseBody: responseBody.map { CapturedBody(bytes: Array($0.utf8)) },
            events: events, error: error, secretValues: secrets)
    }

    /// The console line, the verbose header lines and the JSONL and HAR forms of `flow` under `redactor`.
    static func outputs(_ flow: FlowRecord, _ redactor: Redactor) -> [String] {
        let redacted = redactor.redact(flow)
        return [ConsoleLog.line(for: redacted, utc: true)] + ConsoleLog.headerLines(for: redacted)
            + [JSONLWriter.line(for: redacted), HARWriter.entryJSON(for: redacted)]
    }

    @Test func aOneLetterSecretLeavesURLsAndWordsAlone() {
        let flow = Self.flow(
            requestHeaders: [("Accept", "text/html"), ("X-Mode", "t")],
            events: [HookEvent(hook: .challenge, action: "challenge answered basic"),
                     HookEvent(hook: .rule, action: "mapped", detail: "→ http://127.0.0.1:9000/t")],
            error: "hookproxy: cannot connect to 127.0.0.1: Connection refused", secrets: ["t", "p"])
        for redactor in [Redactor(), Redactor(logSecrets: true)] {
            let texts = Self.outputs(flow, redactor)
            #expect(texts[0].contains(" http://example.com/p/t?x=t "), "\(texts[0])")
            #expect(texts[0].contains("challenge answered basic"), "\(texts[0])")
            #expect(texts[0].contains("mapped: → http://127.0.0.1:9000/t"), "\(texts[0])")
            #expect(texts[0].contains("cannot connect to 127.0.0.1: Connection refused"), "\(texts[0])")
            for text in texts { #expect(!text.contains("htt<redacted>"), "\(text)") }
            // Where the secret stands as a header value it is masked; inside `text/html` it is not a word.
            #expect(texts.contains("  > X-Mode: <redacted>"), "\(texts)")
            #expect(texts.contains("  > Accept: text/html"), "\(texts)")
        }
    }

    @Test func hookproxysCredentialsNeverShowEvenWithLogSecrets() {
        let credential = "Basic YWxpY2U6dA=="  // alice:t
        let flow = Self.flow(
            requestHeaders: [("Authorization", credential), ("Proxy-Authorization", "Basic dXA6cA==")],
            responseBody: "you sent Authorization: \(credential)\r\nand the password t.\n",
            secrets: [credential, "t", "Basic dXA6cA==", "p"])
        let texts = Self.outputs(flow, Redactor(logSecrets: true))
        for text in texts {
            #expect(!text.contains("YWxpY2U6dA"), "\(text)")
            #expect(!text.contains("dXA6cA"), "\(text)")
        }
        #expect(texts.contains("  > Authorization: <redacted>"))
        #expect(texts.contains("  > Proxy-Authorization: <redacted>"))
        #expect(texts[texts.count - 2].contains(#"you sent Authorization: <redacted>\r\nand the password <redacted>.\n"#),
                "\(texts[texts.count - 2])")
    }

    @Test func headerValuesRulesSetFromTheEnvironmentAreMasked() {
        // `X-Api-Key: ${API_KEY}` and `Authorization: "Bearer ${TOKEN}"`: the loader passes the expanded values.
        let flow = Self.flow(
            requestHeaders: [("X-Api-Key", "k3y-Zq81"), ("X-Plain", "visible"), ("X-Sig", "v1 k3y-Zq81")],
            responseHeaders: [("X-Echo-Token", "Bearer tok-991")],
            secrets: ["k3y-Zq81", "Bearer tok-991"])
        for redactor in [Redactor(), Redactor(logSecrets: true)] {
            let texts = Self.outputs(flow, redactor)
            for text in texts {
                #expect(!text.contains("k3y-Zq81") && !text.contains("tok-991"), "\(text)")
            }
            #expect(texts.contains("  > X-Api-Key: <redacted>"))
            #expect(texts.contains("  > X-Sig: v1 <redacted>"))
            #expect(texts.contains("  > X-Plain: visible"))
            #expect(texts.contains("  < X-Echo-Token: <redacted>"))
        }
    }

    @Test func redactQueryReachesLocationRefererAndEvents() {
        let flow = Self.flow(
            url: "http://a.example/start",
            requestHeaders: [("Referer", "http://a.example/login?token=r3f&x=1")],
            responseHeaders: [("Location", "http://b.example/next?token=l0c#top"),
                              ("Content-Location", "/here?token=c0l")],
            events: [HookEvent(hook: .redirect, action: "redirect blocked",
                               detail: "Location http://b.example/next?token=ev3nt (rule r)")],
            error: "hookproxy: redirect blocked: http://b.example/next?token=err0r.")
        let texts = Self.outputs(flow, Redactor(redactQuery: ["token"]))
        for text in texts {
            for value in ["r3f", "l0c", "c0l", "ev3nt", "err0r"] { #expect(!text.contains(value), "\(value) in \(text)") }
        }
        #expect(texts.contains("  > Referer: http://a.example/login?token=<redacted>&x=1"))
        #expect(texts.contains("  < Location: http://b.example/next?token=<redacted>#top"))
        #expect(texts[0].contains("redirect blocked: Location http://b.example/next?token=<redacted> (rule r)"), "\(texts[0])")
        #expect(texts[0].contains("error: hookproxy: redirect blocked: http://b.example/next?token=<redacted>."), "\(texts[0])")
        let har = texts[texts.count - 1]
        #expect(har.contains(#""redirectURL":"http://b.example/next?token=<redacted>#top""#), "\(har)")
    }

    @Test func userinfoIsMaskedInEveryLoggedURL() {
        let flow = Self.flow(
            url: "http://user:PASSW0RD@a.example/x",
            requestHeaders: [("Referer", "https://TOK3N@a.example/")],
            responseHeaders: [("Location", "https://bob:hunter2@b.example/next")],
            events: [HookEvent(hook: .redirect, action: "redirect rewritten", detail: "→ ftp://TOK3N@c.example/f")],
            error: "hookproxy: cannot reach http://carol:s3cr3t@d.example/")
        let texts = Self.outputs(flow, Redactor())
        for text in texts {
            for value in ["PASSW0RD", "TOK3N", "hunter2", "s3cr3t"] { #expect(!text.contains(value), "\(value) in \(text)") }
        }
        #expect(texts[0].contains(" http://user:<redacted>@a.example/x "), "\(texts[0])")
        #expect(texts[0].contains("→ ftp://<redacted>@c.example/f"), "\(texts[0])")
        #expect(texts[0].contains("http://carol:<redacted>@d.example/"), "\(texts[0])")
        #expect(texts.contains("  > Referer: https://<redacted>@a.example/"))
        #expect(texts.contains("  < Location: https://bob:<redacted>@b.example/next"))

        // --log-secrets shows the userinfo the client or server wrote, but never a secret of hookproxy's.
        let shown = Self.outputs(Self.flow(url: "http://user:PASSW0RD@a.example/x",
                                           responseHeaders: [("Location", "http://up:p@proxy.example/")],
                                           secrets: ["p"]), Redactor(logSecrets: true))
        #expect(shown[0].contains(" http://user:PASSW0RD@a.example/x "), "\(shown[0])")
        #expect(shown.contains("  < Location: http://up:<redacted>@proxy.example/"), "\(shown)")
    }

    @Test func urlAndTextRules() {
        let redactor = Redactor(redactQuery: ["key"])
        #expect(redactor.url("https://TOKEN@h/p") == "https://<redacted>@h/p")
        #expect(redactor.url("https://h/p?key=1") == "https://h/p?key=<redacted>")
        #expect(redactor.url("not a url t") == "not a url t")
        #expect(redactor.text("see <http://u:pw@h/?key=2>, then t", secrets: ["t"])
                == "see <http://u:<redacted>@h/?key=<redacted>>, then <redacted>")
        #expect(redactor.text("http://h/t t-shirt", secrets: ["t"]) == "http://h/t t-shirt")
        #expect(Redactor.maskWords(["!x"], in: "a!x b") == "a<redacted> b", "a secret starting with punctuation")
    }

    /// The byte scans behind the common record's fast path: the first `://` of a substring (at any offset into its
    /// string, around multi-byte and combining characters), as a plain search over its bytes finds it.
    @Test func schemeSeparatorIsTheFirstColonSlashSlash() {
        let texts = ["", ":", "://", "a:/b://c", "x://y://z", "é://", "a:/\u{301}/b", "a:\u{301}//b", "😀 see http://h/p",
                     "no scheme here", "127.0.0.1:5000", "ftp:/x", "a://", "::://", "\u{7F}://"]
        for whole in texts {
            for drop in 0...min(2, whole.count) {
                let text = Substring(whole).dropFirst(drop)
                let bytes = Array(text.utf8)
                let expected = bytes.indices.first { $0 + 2 < bytes.count && bytes[$0...$0 + 2].elementsEqual("://".utf8) }
                let found = Redactor.schemeSeparator(in: text)
                let offset = found.map { text.utf8.distance(from: text.utf8.startIndex, to: $0.lowerBound) }
                #expect(offset == expected, "\(whole.debugDescription) minus \(drop)")
                if let found { #expect(String(text[found]) == "://") }
            }
            #expect(Redactor.containsByte(UInt8(ascii: "@"), in: whole) == whole.utf8.contains(UInt8(ascii: "@")))
        }
        #expect(Redactor.containsByte(UInt8(ascii: "@"), in: "https://u@h/"))
    }
}
