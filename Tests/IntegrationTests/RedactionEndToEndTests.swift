import Foundation
import ProxyModel
import ProxyTestSupport
import Testing

/// Issue 11, item 15, through the real binary: `hookproxy run --log-secrets --verbose --jsonl --har` with a rule that
/// sets `X-Api-Key: ${API_KEY}` and answers a Basic challenge with the one-letter password `t`. The console keeps
/// every URL whole (no `htt<redacted>://`), and neither the rule's secret nor hookproxy's credential is in any log.
@Suite("redaction by position (issue 11)", .timeLimit(.minutes(2)))
struct RedactionEndToEndTests {
    static let apiKey = "k3y-Zq81-from-env"

    @Test("rule secrets and a one-letter credential: masked where they stand, URLs left whole")
    func ruleSecretsAndOneLetterPassword() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            try directory.write("""
                rules:
                  - name: api-key
                    match: { host: "127.0.0.1" }
                    request: { set_headers: { X-Api-Key: "${API_KEY}", X-Plain: visible } }
                    on_challenge: { action: use_credential, schemes: [basic], username: alice, password: "t" }

                """, to: "rules/rules.yaml")
            let jsonl = directory.path + "/log.jsonl", har = directory.path + "/log.har"
            let echoURL = origin.baseURL + "/headers"
            let authURL = origin.baseURL + "/auth/basic?user=alice&pass=t"
            let child = try await HookproxyProcess.with(
                ["run", "--listen", "127.0.0.1:0", "--rules", directory.path + "/rules", "--log-secrets", "--verbose",
                 "--jsonl", jsonl, "--har", har],
                environment: ["API_KEY": Self.apiKey], directory: directory
            ) { child in
                let echo = try await child.curl(echoURL)
                #expect(echo.status == 200)
                #expect(echo.bodyText.contains("X-Api-Key: \(Self.apiKey)"), "the origin got the key: \(echo.bodyText)")
                let auth = try await child.curl(authURL)
                #expect(auth.status == 200, "\(auth.bodyText)")
                _ = await LogFiles.waitForJSONL(jsonl, count: 2)
                return child
            }
            let console = child.stdout
            let lines = LogFiles.jsonlLines(jsonl)
            let jsonlText = (try? String(contentsOfFile: jsonl, encoding: .utf8)) ?? ""
            let harText = (try? String(contentsOfFile: har, encoding: .utf8)) ?? ""
            let credential = Data("alice:t".utf8).base64EncodedString()

            #expect(console.contains(" GET \(echoURL) "), "\(console)")
            #expect(console.contains(" GET \(authURL) "), "\(console)")
            #expect(console.contains("challenge answered basic"), "\(console)")
            #expect(console.contains("  > X-Api-Key: <redacted>"), "\(console)")
            #expect(console.contains("  > X-Plain: visible"), "\(console)")
            for (name, text) in [("console", console), ("jsonl", jsonlText), ("har", harText)] {
                #expect(!text.contains("htt<redacted>"), "\(name): \(text)")
                #expect(!text.contains(Self.apiKey), "\(name) shows the rule's secret")
                #expect(!text.contains(credential), "\(name) shows hookproxy's credential")
            }
            #expect(lines.count == 2)
            let first = try #require(lines.first ?? nil)
            let headers = try #require(first["request_headers"] as? [[String: String]])
            #expect(headers.first { $0["name"] == "X-Api-Key" }?["value"] == "<redacted>", "\(headers)")
            #expect((first["response_body"] as? String)?.contains("X-Api-Key: <redacted>\r\n") == true,
                    "the echo of the key in the body: \(String(describing: first["response_body"]))")
            #expect(first["url"] as? String == echoURL)
            #expect(lines.last??["url"] as? String == authURL)
        }
    }
}
