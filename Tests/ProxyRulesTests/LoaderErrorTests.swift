import Foundation
import Testing
@testable import ProxyRules

@Suite struct LoaderErrorTests {
    @Test func notYAML() {
        #expect(errorsOf("rules:\n  - name: a\n    match: {host: [x\n") ==
                ["r.yaml:4:1: not valid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 3)"])
    }

    @Test func tabIndentation() {
        #expect(errorsOf("rules:\n  - name: a\n\tmatch: {}\n") ==
                ["r.yaml:3:1: tab character in indentation; YAML indents with spaces"])
    }

    @Test func notUTF8() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("r.yaml", bytes: Array("rules:\n  - name: caf".utf8) + [0xE9, 0x0A])
        #expect(dir.errors() == ["r.yaml:2:14: file is not UTF-8 text (invalid byte 0xE9)"])
    }

    @Test func emptyFile() {
        #expect(errorsOf("") == ["r.yaml:1:1: empty rule file: expected a top-level 'rules:' list"])
        #expect(errorsOf("# only a comment\n\n") == ["r.yaml:1:1: empty rule file: expected a top-level 'rules:' list"])
    }

    @Test func hugeFile() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("r.yaml", "rules: []\n" + String(repeating: "# padding\n", count: 500_000))
        #expect(dir.errors() == ["r.yaml:1:1: file is 5000010 bytes; rule files are limited to 4194304 bytes (4 MiB)"])
    }

    @Test func unknownKeySuggestsNearest() {
        #expect(errorsOf("rules:\n  - name: a\n    mach: {host: x}\n") ==
                ["r.yaml:3:5: unknown key 'mach' in 'rule' — did you mean 'match'?"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {hots: x}\n") ==
                ["r.yaml:3:13: unknown key 'hots' in 'match' — did you mean 'host'?"])
        #expect(errorsOf("rulez: []\n") == ["r.yaml:1:1: unknown key 'rulez' in 'top level' — did you mean 'rules'?",
                                            "r.yaml:1:1: a rule file holds a top-level 'rules:' list"])
    }

    @Test func wrongType() {
        #expect(errorsOf("rules:\n  - name: a\n    match: [x]\n") ==
                ["r.yaml:3:12: 'match' must be a mapping, found a list"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {port: https}\n") ==
                ["r.yaml:3:19: 'match.port' must be a whole number, found 'https'"])
        #expect(errorsOf("rules:\n  - name: a\n    intercept: yes please\n") ==
                ["r.yaml:3:16: 'intercept' must be true or false, found 'yes please'"])
        #expect(errorsOf("rules: {a: 1}\n") ==
                ["r.yaml:1:8: 'rules' must be a list of rules (each starting with '- name:'), found a mapping"])
    }

    @Test func badGlobAndRegex() {
        #expect(errorsOf("rules:\n  - name: a\n    match: {host: \"api.[ab].test\"}\n") ==
                ["r.yaml:3:19: bad host glob 'api.[ab].test': '[' is not glob syntax here (globs know only * and ?; use path_regex for classes)"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {host: \"api.test:443\"}\n") ==
                ["r.yaml:3:19: bad host glob 'api.test:443': put the port in 'port', not in 'host'"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {path: \"v1/*\"}\n") ==
                ["r.yaml:3:19: bad path glob 'v1/*': a path starts with '/' (the query is matched with 'query')"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {path_regex: \"^/v1/(\"}\n") ==
                ["r.yaml:3:25: bad regex '^/v1/(': missing closing parenthesis (at offset 6)"])
    }

    @Test func missingReferencedFile() {
        // (The helper strips the temporary directory from messages, so "looked for" shows a relative path.)
        #expect(errorsOf("rules:\n  - name: a\n    respond: {body_file: mocks/nope.json}\n") ==
                ["r.yaml:3:26: body_file 'mocks/nope.json' not found (looked for mocks/nope.json)"])
        #expect(errorsOf("rules:\n  - name: a\n    trust: {pinning: certificate, certificates: [certs/x.pem]}\n") ==
                ["r.yaml:3:50: certificate file 'certs/x.pem' not found (looked for certs/x.pem)"])
        #expect(errorsOf("rules:\n  - name: a\n    trust: {ca_file: ca.pem}\n") ==
                ["r.yaml:3:22: trust.ca_file 'ca.pem' not found (looked for ca.pem)"])
        #expect(errorsOf("rules:\n  - name: a\n    on_challenge: {client_certificate: {cert: me.pem, key: me.key}}\n") ==
                ["r.yaml:3:47: client_certificate.cert 'me.pem' not found (looked for me.pem)"])
        #expect(errorsOf("rules:\n  - name: a\n    response: {body: {file: other.txt}}\n") ==
                ["r.yaml:3:29: file 'other.txt' not found (looked for other.txt)"])
    }

    @Test func duplicateNameAcrossFiles() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: same\n")
        dir.write("b.yaml", "rules:\n  - name: other\n  - name: same\n")
        #expect(dir.errors() == [
            "b.yaml:3:11: duplicate rule name 'same' (first defined at a.yaml:2:11); names are unique across all files"
        ])
    }

    @Test func groupBeyondRegex() {
        #expect(errorsOf("rules:\n  - name: a\n    match: {path_regex: \"^/v1/(\\\\w+)$\"}\n    map_remote: {to: \"http://h/$2\"}\n") ==
                ["r.yaml:4:22: 'map_remote.to' uses $2 but match.path_regex has only 1 group"])
        #expect(errorsOf("rules:\n  - name: a\n    redirect_client: {location: \"/x/$1\"}\n") ==
                ["r.yaml:3:33: 'redirect_client.location' uses $1 but the rule has no 'match.path_regex' to capture it"])
        #expect(errorsOf("rules:\n  - name: a\n    response: {body: {replace: [{regex: \"a(b)\", with: \"$2\"}]}}\n") ==
                ["r.yaml:3:55: 'with' uses $2 but the regex has only 1 group"])
    }

    @Test func exclusiveTargets() {
        #expect(errorsOf("rules:\n  - name: a\n    respond: {status: 204}\n    map_remote: {to: \"http://h\"}\n") ==
                ["r.yaml:4:5: 'respond' and 'map_remote' exclude each other in one rule (split it into two rules)"])
        #expect(errorsOf("rules:\n  - name: a\n    respond: {body: x, body_file: y}\n") ==
                ["r.yaml:3:24: 'body' and 'body_file' exclude each other in 'respond'; use one"])
    }

    @Test func unsetVariable() {
        #expect(errorsOf("rules:\n  - name: a\n    request: {set_headers: {Authorization: \"Bearer ${API_TOKEN}\"}}\n") ==
                ["r.yaml:3:44: environment variable 'API_TOKEN' is not set (used as ${API_TOKEN})"])
        #expect(errorsOf("rules:\n  - name: a\n    request: {set_headers: {Authorization: \"Bearer ${API_TOKEN}\"}}\n",
                         env: ["API_TOKEN": "t"]).isEmpty)
    }

    @Test func trustLoadErrors() {
        // TRUST-CASES row 10: public_key with an empty pin set.
        #expect(errorsOf("rules:\n  - name: pk\n    trust: {pinning: public_key, pins: []}\n") ==
                ["r.yaml:3:13: rule 'pk': pinning: public_key with no pins or certificates can never pass; add pins or certificates"])
        // Row 19: certificate mode with an empty set, or an empty directory.
        #expect(errorsOf("rules:\n  - name: c\n    trust: {pinning: certificate, certificates: []}\n") ==
                ["r.yaml:3:13: rule 'c': pinning: certificate with no certificates can never pass; add certificates"])
        let dir = TempRules()
        defer { dir.remove() }
        try? FileManager.default.createDirectory(atPath: dir.path + "/empty", withIntermediateDirectories: true)
        dir.write("r.yaml", "rules:\n  - name: c\n    trust: {pinning: certificate, certificates: [empty]}\n")
        #expect(dir.errors() == ["r.yaml:3:13: rule 'c': pinning: certificate with no certificates can never pass; add certificates"])
        // Row 22: pins in certificate mode.
        #expect(errorsOf("rules:\n  - name: c\n    trust: {pinning: certificate, pins: [\"sha256//fX1b5SS8+c4JVgRYpluHLwq3Ws2J9D+cq7SaFupJX0M=\"]}\n") ==
                ["r.yaml:3:35: rule 'c': 'pins' are public-key hashes; 'pinning: certificate' takes 'certificates' (or use 'pinning: public_key')"])
        // Row 30: allow_invalid_certificates + validate_domain_name without pinning.
        let step0 = "rule 'n': allow_invalid_certificates with validate_domain_name and no pinning can never pass (AFSecurityPolicy rejects it); add pins or set validate_domain_name: false"
        #expect(errorsOf("rules:\n  - name: n\n    trust: {allow_invalid_certificates: true}\n") == ["r.yaml:3:12: \(step0)"])
        // Row 31: mode none with certificates pins nothing.
        #expect(errorsOf("rules:\n  - name: n\n    trust: {pinning: none, certificates: [c.pem], allow_invalid_certificates: true}\n",
                         files: ["c.pem": ExampleCertificate.pem]) == ["r.yaml:3:12: \(step0)"])
        // Row 32: public_key with empty pins and allow_invalid_certificates: both reasons.
        #expect(errorsOf("rules:\n  - name: n\n    trust: {pinning: public_key, pins: [], allow_invalid_certificates: true}\n") == [
            "r.yaml:3:12: \(step0)",
            "r.yaml:3:13: rule 'n': pinning: public_key with no pins or certificates can never pass; add pins or certificates",
        ])
        #expect(errorsOf("rules:\n  - name: n\n    trust: {pinning: public_key, pins: [\"sha256//abc\"]}\n") ==
                ["r.yaml:3:41: bad pin 'sha256//abc': a pin is 'sha256//' followed by the base64 of a 32-byte SHA-256 (see 'hookproxy pin HOST')"])
    }

    @Test func challengeErrorsAndWarnings() {
        #expect(errorsOf("rules:\n  - name: a\n    on_challenge: {action: use_credential}\n") ==
                ["r.yaml:3:28: 'on_challenge.action: use_credential' needs 'username'"])
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("r.yaml", "rules:\n  - name: a\n    on_challenge: {action: use_credential, username: u, password: hunter2}\n")
        #expect(dir.warnings() == ["r.yaml:3:67: warning: a literal password in a rule file; prefer 'password_env: VARIABLE' so the secret stays out of the file"])
    }

    @Test func headerInjectionRefused() {
        #expect(errorsOf("rules:\n  - name: a\n    redirect_client: {location: \"/x\\r\\nSet-Cookie: a=b\"}\n") ==
                ["r.yaml:3:33: 'redirect_client.location' holds a line break or control character"])
        #expect(errorsOf("rules:\n  - name: a\n    request: {set_headers: {X-A: \"1\\r\\nX-B: 2\"}}\n") ==
                ["r.yaml:3:34: the value of header 'X-A' holds a line break or control character"])
    }

    @Test func missingName() {
        #expect(errorsOf("rules:\n  - match: {host: x}\n") ==
                ["r.yaml:2:5: rule has no 'name' (every rule needs a unique name)"])
    }

    @Test func missingRulesPath() {
        do throws(RuleLoadFailure) {
            _ = try RuleLoader.load(paths: ["/nonexistent/hookproxy-rules"], environment: [:])
            Issue.record("expected a failure")
        } catch {
            #expect(error.description == "/nonexistent/hookproxy-rules:1:1: --rules path does not exist")
        }
    }

    @Test func collectsErrorsAcrossFiles() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: a\n    mach: {}\n  - name: b\n    delay_ms: -1\n")
        dir.write("b.yml", "rules:\n  - name: c\n    respond: {status: 42}\n")
        dir.write("c.yaml~", "this is a backup: [\n")
        dir.write(".d.yaml.swp", "swap")
        #expect(dir.errors() == [
            "a.yaml:3:5: unknown key 'mach' in 'rule' — did you mean 'match'?",
            "a.yaml:5:15: 'delay_ms' must be between 0 and 600000, found -1",
            "b.yml:3:23: 'respond.status' must be between 100 and 599, found 42",
        ])
    }

    @Test func checkReport() {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", "rules:\n  - name: a\n  - name: b\n")
        dir.write("b.yaml", "rules: []\n")
        let ok = RuleLoader.check(paths: [dir.path], environment: [:])
        #expect(ok.exitCode == 0)
        #expect(ok.standardOutput == "ok: 2 rules in 2 files\n")
        dir.write("b.yaml", "rules: [{name: c, mach: 1}]\n")
        let bad = RuleLoader.check(paths: [dir.path], environment: [:])
        #expect(bad.exitCode == 1)
        #expect(bad.standardError == "\(dir.path)/b.yaml:1:19: unknown key 'mach' in 'rule' — did you mean 'match'?\n")
    }

    /// Nine lines naming each other ten times over: 10⁹ nodes once aliases are expanded.
    static let aliasBomb = "x:\n  a: &a [x,x,x,x,x,x,x,x,x,x]\n" + zip("abcdefgh", "bcdefghi").map { inner, name in
        "  \(name): &\(name) [" + Array(repeating: "*\(inner)", count: 10).joined(separator: ",") + "]\n"
    }.joined()

    /// Yams hashes mapping keys to find duplicates; an alias bomb as a key kept `hookproxy check` (and a hot
    /// reload) at 100 % CPU for minutes (found by a review helper).
    @Test(.timeLimit(.minutes(1)), arguments: ["rules:\n  - name: r\n    match:\n      ? *i\n      : 1\n",
                      "y:\n  ? *i\n  : 1\n  ? *i\n  : 2\nrules: []\n",
                      "y: {[*i]: 1}\nrules: []\n"])
    func aliasBombAsAKey(_ tail: String) {
        let errors = errorsOf(Self.aliasBomb + tail)
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains("aliases expand this file to more than 4000000 nodes (an alias bomb?)") == true,
                "\(errors)")
    }

    @Test func aliasBombAsAValue() {
        // The nine lines alone expand to 10⁹ nodes: refused before any rule is read.
        let errors = errorsOf(Self.aliasBomb + "rules:\n  - name: r\n    response: {body: {json: {set: {a: *i}}}}\n")
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains(":8:16: aliases expand this file to more than 4000000 nodes") == true, "\(errors)")
        // Within the file's bound, a json.set value still has its own (200,000 nodes).
        let wide = "a: &a [" + Array(repeating: "x", count: 1000).joined(separator: ",") + "]\nb: &b ["
            + Array(repeating: "*a", count: 300).joined(separator: ",") + "]\n"
        let set = errorsOf(wide + "rules:\n  - name: r\n    response: {body: {json: {set: {a: *b}}}}\n")
        #expect(set.contains { $0.contains("value too large (alias expansion?)") }, "\(set)")
    }

    /// One rule of 20,000 hosts, then listed again 20,000 times by alias: a 1 MB file the loader walked as 4×10⁸
    /// hosts, holding `hookproxy check` (or a hot reload) for many minutes. Aliases are bounded in values as in
    /// keys: the file is refused where its expansion passes the bound.
    @Test(.timeLimit(.minutes(1))) func aliasedValuesAreBoundedToo() {
        let hosts = (0..<20_000).map { "        - h\($0).example\n" }.joined()
        let yaml = "rules:\n  - &r\n    name: r\n    match:\n      host:\n" + hosts + "    respond: {status: 204}\n"
            + String(repeating: "  - *r\n", count: 20_000)
        let errors = errorsOf(yaml)
        #expect(errors.count == 1, "\(errors.prefix(3))")
        #expect(errors.first?.hasSuffix(":20205:5: aliases expand this file to more than 4000000 nodes (an alias bomb?); "
                                        + "a rule file is read whole") == true, "\(errors.prefix(3))")
    }

    @Test func neverCrashesOnOddInput() {
        let inputs = ["rules", "- a\n- b\n", "rules: [1, 2]", "rules: [{name: [1]}]", "rules: [{name: a, match: {query: [1]}}]",
                      "&a [*a]", "rules: !!binary AAAA", "rules:\n  - name: a\n    response: {body: {json: {set: {\"a..b\": 1}}}}",
                      "--- a\n--- b\n", "rules: [{name: a, respond: {headers: {\"Bad Name\": x}}}]", String(repeating: "[", count: 5000)]
        for input in inputs {
            #expect(!errorsOf(input).isEmpty, "\(input)")
        }
    }
}

enum ExampleCertificate {
    /// The public certificate shipped in rules/certs (its private key was never kept).
    static var pem: String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("rules/certs/example-api.pem"), encoding: .utf8)) ?? ""
    }
}
