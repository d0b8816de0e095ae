import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

@Suite struct RedactionTests {
    /// Writes every sample to all three outputs and returns their bytes as text.
    static func outputs(_ redactor: Redactor) throws -> (har: String, jsonl: String, console: String) {
        let directory = TestFiles.directory()
        let har = directory.appendingPathComponent("r.har").path
        let jsonl = directory.appendingPathComponent("r.jsonl").path
        let consolePath = directory.appendingPathComponent("console.txt").path
        let consoleFD = open(consolePath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let recorder = MultiRecorder([
            try HARWriter(path: har, creatorVersion: "1", redactor: redactor),
            try JSONLWriter(path: jsonl, redactor: redactor),
            ConsoleLog(verbose: true, redactor: redactor, color: false, fileDescriptor: consoleFD),
        ])
        for flow in Samples.all { recorder.record(flow) }
        recorder.close()
        close(consoleFD)
        return (try String(contentsOfFile: har, encoding: .utf8), try String(contentsOfFile: jsonl, encoding: .utf8),
                try String(contentsOfFile: consolePath, encoding: .utf8))
    }

    @Test func secretsRedactedByDefault() throws {
        let (har, jsonl, console) = try Self.outputs(Redactor())
        for (name, text) in [("har", har), ("jsonl", jsonl), ("console", console)] {
            for secret in ["client-token", "cookie-value", "new-cookie", Samples.credentialHeader, Samples.password] {
                #expect(!text.contains(secret), "\(name) shows \(secret)")
            }
            #expect(text.contains("<redacted>"), "\(name)")
        }
        let entries = try JSONSerialization.jsonObject(with: Data(har.utf8)) as? [String: Any]
        let first = try #require(((entries?["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first)
        let headers = try #require((first["request"] as? [String: Any])?["headers"] as? [[String: String]])
        #expect(headers.first { $0["name"] == "Authorization" }?["value"] == "<redacted>")
        #expect(headers.first { $0["name"] == "Cookie" }?["value"] == "<redacted>")
        #expect(headers.first { $0["name"] == "Accept" }?["value"] == "*/*")
        #expect(console.contains("  > Authorization: <redacted>"))
        #expect(console.contains("  < Set-Cookie: <redacted>"))
    }

    @Test func logSecretsShowsThemButNeverTheOnesHookproxyAdded() throws {
        let (har, jsonl, console) = try Self.outputs(Redactor(logSecrets: true))
        for (name, text) in [("har", har), ("jsonl", jsonl), ("console", console)] {
            #expect(text.contains("Bearer client-token"), "\(name)")
            #expect(text.contains("sid=cookie-value"), "\(name)")
            #expect(text.contains("sid=new-cookie"), "\(name)")
            // the challenge credential and its password (echoed in a body) stay hidden
            #expect(!text.contains(Samples.credentialHeader), "\(name)")
            #expect(!text.contains(Samples.password), "\(name)")
        }
        #expect(jsonl.contains(#""response_body":"you said: <redacted>!""#))
    }

    @Test func namedQueryParametersRedactedInEveryURL() throws {
        let redactor = Redactor(redactQuery: ["token"])
        let (har, jsonl, console) = try Self.outputs(redactor)
        for (name, text) in [("har", har), ("jsonl", jsonl), ("console", console)] {
            #expect(!text.contains("abc123"), "\(name)")
        }
        let line = try #require(jsonl.split(separator: "\n").first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["url"] as? String == "http://api.example.com/v1/users?token=<redacted>&page=2")
        #expect(object["upstream_url"] as? String == "http://127.0.0.1:9000/v1/users?token=<redacted>&page=2")
        let entries = try JSONSerialization.jsonObject(with: Data(har.utf8)) as? [String: Any]
        let first = try #require(((entries?["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first)
        let request = try #require(first["request"] as? [String: Any])
        #expect(request["url"] as? String == "http://api.example.com/v1/users?token=<redacted>&page=2")
        #expect(request["queryString"] as? [[String: String]]
                == [["name": "token", "value": "<redacted>"], ["name": "page", "value": "2"]])
        #expect((first["_hookproxy"] as? [String: Any])?["upstream_url"] as? String
                == "http://127.0.0.1:9000/v1/users?token=<redacted>&page=2")
    }

    @Test func urlRules() {
        let redactor = Redactor(redactQuery: ["key", "api key"])
        #expect(redactor.url("http://h/p?key=1&keys=2&KEY=3#frag") == "http://h/p?key=<redacted>&keys=2&KEY=<redacted>#frag")
        #expect(redactor.url("http://h/p?api%20key=9&x") == "http://h/p?api%20key=<redacted>&x")
        #expect(redactor.url("http://user:pw@h/p") == "http://user:<redacted>@h/p")
        #expect(Redactor(logSecrets: true).url("http://user:pw@h/p") == "http://user:pw@h/p")
        #expect(Redactor.maskWords(["pw"], in: Array("a pw,b=pw".utf8)) == Array("a <redacted>,b=<redacted>".utf8))
        #expect(Redactor.maskWords(["pw"], in: Array("apwbpw".utf8)) == Array("apwbpw".utf8), "whole words only")
    }
}
