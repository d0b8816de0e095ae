import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 3, every rule action through real sockets: curl → hookproxy (in-process, rules loaded from files) → origin.
@Suite("rule actions", .timeLimit(.minutes(2)))
struct RuleActionTests {
    /// Writes `files` (name → YAML) into `rules/` of a fresh directory (plus `extra` files beside them), loads them,
    /// and runs `body` with a proxy using them.
    func withRules(_ files: [(String, String)], extra: [(String, [UInt8])] = [],
                   limits: ProxyLimits = ProxyLimits(),
                   _ body: (ProxyHarness) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        for (name, yaml) in files { try directory.write(yaml, to: "rules/\(name)") }
        for (name, bytes) in extra { try directory.write(bytes, to: "rules/\(name)") }
        let store = try RuleStore(paths: [directory.path + "/rules"], environment: [:])
        try await withHookProxy(rules: store, { $0.limits = limits }) { proxy in try await body(proxy) }
    }

    func withRules(_ yaml: String, extra: [(String, [UInt8])] = [], limits: ProxyLimits = ProxyLimits(),
                   _ body: (ProxyHarness) async throws -> Void) async throws {
        try await withRules([("rules.yaml", yaml)], extra: extra, limits: limits, body)
    }

    /// The header lines of `/headers`' answer (the raw request head the origin received).
    static func receivedHeaders(_ response: CurlResponse) -> [String] {
        response.bodyText.components(separatedBy: "\r\n").dropFirst().filter { !$0.isEmpty }
    }

    // MARK: map_remote

    @Test("map_remote: path_regex $1 and {query} into another port; Host becomes the mapped host")
    func mapRemoteRegexAndQuery() async throws {
        try await withOrigin { first in
            try await withOrigin { second in
                let yaml = """
                    rules:
                      - name: to-second
                        match: { host: "127.0.0.1", port: \(first.port), path_regex: "^/api/(\\\\w+)$" }
                        map_remote: { to: "http://localhost:\(second.port)/$1?{query}&mapped=1" }
                    """
                try await withRules(yaml) { proxy in
                    let response = try await Hooks.curl(proxy, "\(first.baseURL)/api/headers?x=1")
                    #expect(response.status == 200)
                    #expect(first.requests.isEmpty)
                    #expect(second.requests.map(\.target) == ["/headers?x=1&mapped=1"])
                    #expect(second.requests.first?.header("Host") == "localhost:\(second.port)")
                    let records = await Hooks.records(proxy)
                    #expect(records.first?.rules == ["to-second"])
                    #expect(records.first?.url == "\(first.baseURL)/api/headers?x=1")
                    #expect(records.first?.upstreamURL == "http://localhost:\(second.port)/headers?x=1&mapped=1")
                    #expect(Hooks.eventTexts(records).contains("mapped → http://localhost:\(second.port)/headers?x=1&mapped=1"),
                            "\(Hooks.eventTexts(records))")
                }
            }
        }
    }

    @Test("map_remote: {scheme}{host}{path} templates; a `to` without a path keeps path and query")
    func mapRemoteTemplatesAndKeptPath() async throws {
        try await withOrigin { first in
            try await withOrigin { second in
                let yaml = """
                    rules:
                      - name: templated
                        match: { port: \(first.port), path: "/t/*" }
                        map_remote: { to: "{scheme}://{host}:\(second.port)/echo?was={path}" }
                      - name: no-path
                        match: { port: \(first.port), path: "/echo" }
                        map_remote: { to: "http://127.0.0.1:\(second.port)" }
                    """
                try await withRules(yaml) { proxy in
                    let templated = try await Hooks.curl(proxy, "\(first.baseURL)/t/a")
                    #expect(templated.status == 200)
                    #expect(templated.header("X-Target") == "/echo?was=/t/a")
                    let kept = try await Hooks.curl(proxy, "\(first.baseURL)/echo?a=b&c=d", ["--data-binary", "posted"])
                    #expect(kept.status == 200)
                    #expect(kept.header("X-Target") == "/echo?a=b&c=d")
                    #expect(kept.bodyText == "posted")
                    #expect(second.requests.last?.header("Host") == "127.0.0.1:\(second.port)")
                    #expect(first.requests.isEmpty)
                }
            }
        }
    }

    @Test("map_remote: a request.set_headers Host wins over the mapped host")
    func mapRemoteHostFromSetHeaders() async throws {
        try await withOrigin { first in
            try await withOrigin { second in
                let yaml = """
                    rules:
                      - name: mapped
                        match: { port: \(first.port) }
                        map_remote: { to: "http://127.0.0.1:\(second.port)" }
                        request: { set_headers: { Host: "virtual.example.test" } }
                    """
                try await withRules(yaml) { proxy in
                    let response = try await Hooks.curl(proxy, "\(first.baseURL)/headers")
                    #expect(response.status == 200)
                    #expect(second.requests.first?.header("Host") == "virtual.example.test")
                    #expect(Self.receivedHeaders(response).filter { $0.lowercased().hasPrefix("host:") }
                            == ["Host: virtual.example.test"])
                }
            }
        }
    }

    // MARK: respond / redirect_client

    @Test("respond with an inline body: status, headers, text/plain; the origin is never asked")
    func respondInline() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: inline-mock
                    match: { port: \(origin.port), path: "/mocked" }
                    respond: { status: 201, headers: { X-Mock: "yes" }, body: "mocked body\\n" }
                """
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/mocked")
                #expect(response.status == 201)
                #expect(response.bodyText == "mocked body\n")
                #expect(response.header("X-Mock") == "yes")
                #expect(response.header("Content-Type")?.hasPrefix("text/plain") == true)
                #expect(response.header("Content-Length") == "12")
                #expect(origin.requests.isEmpty)
                #expect(origin.acceptedConnections == 0)
                let records = await Hooks.records(proxy)
                #expect(records.first?.rules == ["inline-mock"])
                #expect(records.first?.upstreamURL == nil)
                #expect(Hooks.eventTexts(records).contains("responded 201"), "\(Hooks.eventTexts(records))")
            }
        }
    }

    @Test("respond with body_file: bytes of the file, Content-Type from the extension, `responded from …`",
          arguments: [("mocks/user.json", "application/json"), ("mocks/page.html", "text/html")])
    func respondBodyFile(file: String, mime: String) async throws {
        try await withOrigin { origin in
            let content = file.hasSuffix(".json") ? #"{"id": 42, "name": "Ada"}"# + "\n" : "<p>mock</p>\n"
            let yaml = """
                rules:
                  - name: file-mock
                    match: { port: \(origin.port) }
                    respond: { body_file: \(file) }
                """
            try await withRules(yaml, extra: [(file, Array(content.utf8))]) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/v1/users/42")
                #expect(response.status == 200)
                #expect(response.bodyText == content)
                #expect(response.header("Content-Type")?.hasPrefix(mime) == true, "\(response.headers)")
                #expect(response.header("Content-Length") == String(content.utf8.count))
                #expect(origin.requests.isEmpty)
                let records = await Hooks.records(proxy)
                #expect(Hooks.eventTexts(records).contains("responded from \(file)"), "\(Hooks.eventTexts(records))")
            }
        }
    }

    @Test("redirect_client: 302 by default with a templated Location; an explicit status")
    func redirectClient() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: default-status
                    match: { port: \(origin.port), path_regex: "^/old/(.*)$" }
                    redirect_client: { location: "http://127.0.0.1:\(origin.port)/new/$1?{query}" }
                  - name: temporary
                    match: { port: \(origin.port), path: "/moved" }
                    redirect_client: { status: 307, location: "{scheme}://{host}:{port}/echo" }
                """
            try await withRules(yaml) { proxy in
                let first = try await Hooks.curl(proxy, "\(origin.baseURL)/old/a/b?x=1")
                #expect(first.status == 302)
                #expect(first.header("Location") == "http://127.0.0.1:\(origin.port)/new/a/b?x=1")
                let second = try await Hooks.curl(proxy, "\(origin.baseURL)/moved")
                #expect(second.status == 307)
                #expect(second.header("Location") == "http://127.0.0.1:\(origin.port)/echo")
                #expect(origin.requests.isEmpty)
                let records = await Hooks.records(proxy, count: 2)
                #expect(Hooks.eventTexts(records).contains { $0.hasPrefix("redirected client → http://127.0.0.1:\(origin.port)/new/a/b?x=1") },
                        "\(Hooks.eventTexts(records))")
            }
        }
    }

    // MARK: header edits

    @Test("request set_headers / remove_headers are what the origin receives")
    func requestHeaderEdits() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: edits
                    match: { port: \(origin.port) }
                    request:
                      set_headers: { X-Added: "1", User-Agent: "hookproxy-test" }
                      remove_headers: [Cookie, X-Drop-Me]
                """
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(
                    proxy, "\(origin.baseURL)/headers",
                    ["-H", "Cookie: a=1", "-H", "X-Drop-Me: yes", "-H", "X-Keep: kept", "-A", "curl-original"])
                #expect(response.status == 200)
                let received = try #require(origin.requests.first)
                #expect(received.header("X-Added") == "1")
                #expect(received.header("User-Agent") == "hookproxy-test")
                #expect(received.header("Cookie") == nil)
                #expect(received.header("X-Drop-Me") == nil)
                #expect(received.header("X-Keep") == "kept")
                let lines = Self.receivedHeaders(response)
                #expect(lines.filter { $0.lowercased().hasPrefix("user-agent:") }.count == 1, "\(lines)")
            }
        }
    }

    @Test("response set_headers / remove_headers / status are what the client receives")
    func responseHeaderEdits() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: response-edits
                    match: { port: \(origin.port) }
                    response:
                      status: 404
                      set_headers: { X-Served-Through: hookproxy }
                      remove_headers: [Set-Cookie]
                """
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/set-cookies")
                #expect(response.status == 404)
                #expect(response.header("X-Served-Through") == "hookproxy")
                #expect(response.header("Set-Cookie") == nil, "\(response.headers)")
                let records = await Hooks.records(proxy)
                #expect(records.first?.response?.status == 404)
            }
        }
    }

    // MARK: body transforms

    @Test("body replace: regex with $1 and plain text, on the response; Content-Length follows")
    func responseBodyReplace() async throws {
        try await withOrigin { origin in
            let yaml = #"""
                rules:
                  - name: replace
                    match: { port: \#(origin.port), path: /echo }
                    response:
                      body:
                        replace:
                          - { regex: "name=(\\w+)", with: "user=$1!" }
                          - { text: "paris", with: "rome" }
                """#
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo",
                                                    ["--data-binary", "name=alice; city=paris; paris"])
                #expect(response.status == 200)
                #expect(response.bodyText == "user=alice!; city=rome; rome")
                #expect(response.header("Content-Length") == String("user=alice!; city=rome; rome".utf8.count))
                #expect(response.header("Transfer-Encoding") == nil)
            }
        }
    }

    @Test("request body replace: the origin receives the transformed body with its Content-Length")
    func requestBodyReplace() async throws {
        try await withOrigin { origin in
            let yaml = #"""
                rules:
                  - name: request-replace
                    match: { port: \#(origin.port) }
                    request:
                      body:
                        replace: [{ text: "secret", with: "public-value" }]
                """#
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo", ["--data-binary", "a secret here"])
                #expect(response.bodyText == "a public-value here")
                #expect(origin.requests.first?.body == Array("a public-value here".utf8))
                #expect(origin.requests.first?.header("Content-Length") == "19")
            }
        }
    }

    @Test("json set/remove on a JSON response: nested paths, created keys, removed keys")
    func jsonSetRemove() async throws {
        try await withOrigin { origin in
            let yaml = #"""
                rules:
                  - name: json-edit
                    match: { port: \#(origin.port), path: /echo }
                    response:
                      body:
                        json:
                          set: { "a.b[0].c": 2, "features.new": true, "name": "changed" }
                          remove: [token]
                """#
            try await withRules(yaml) { proxy in
                let sent = #"{"a":{"b":[{"c":1},{"c":5}]},"token":"xyz","name":"orig"}"#
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo",
                                                    ["--data-binary", sent, "-H", "Content-Type: application/json"])
                #expect(response.status == 200)
                let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
                let a = try #require(object["a"] as? [String: Any])
                let b = try #require(a["b"] as? [[String: Any]])
                #expect(b.map { $0["c"] as? Int } == [2, 5])
                #expect((object["features"] as? [String: Any])?["new"] as? Bool == true)
                #expect(object["name"] as? String == "changed")
                #expect(object["token"] == nil)
                #expect(response.header("Content-Length") == String(response.body.count))
            }
        }
    }

    @Test("json set on a body that is not JSON leaves it unchanged and logs why")
    func jsonOnNonJSON() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: json-edit
                    match: { port: \(origin.port) }
                    response: { body: { json: { set: { a: 1 } } } }
                """
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo", ["--data-binary", "not json"])
                #expect(response.bodyText == "not json")
                let records = await Hooks.records(proxy)
                #expect(records.first?.events.contains { $0.hook == .body } == true, "\(Hooks.eventTexts(records))")
            }
        }
    }

    @Test("body file: the response body becomes the file's content")
    func bodyFile() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: fixture
                    match: { port: \(origin.port) }
                    response: { body: { file: mocks/replacement.txt } }
                """
            try await withRules(yaml, extra: [("mocks/replacement.txt", Array("from the file\n".utf8))]) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo", ["--data-binary", "from the origin"])
                #expect(response.status == 200)
                #expect(response.bodyText == "from the file\n")
                #expect(response.header("Content-Length") == "14")
            }
        }
    }

    @Test("a respond body is transformed by a json rule too (response edits apply to local answers)")
    func transformOnLocalAnswer() async throws {
        try await withOrigin { origin in
            let yaml = #"""
                rules:
                  - name: mock
                    match: { port: \#(origin.port) }
                    respond: { headers: { Content-Type: application/json }, body: '{"user":{"id":1}}' }
                  - name: edit
                    match: { port: \#(origin.port) }
                    response:
                      set_headers: { X-Edited: "1" }
                      body: { json: { set: { "user.id": 7 } } }
                """#
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/anything")
                #expect(response.header("X-Edited") == "1")
                let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                #expect((object?["user"] as? [String: Any])?["id"] as? Int == 7, "\(response.bodyText)")
                #expect(origin.requests.isEmpty)
            }
        }
    }

    @Test("gzip origin body: transformed, sent decoded without Content-Encoding, with the right Content-Length")
    func gzipTransformed() async throws {
        try await GzipOrigin.with { port in
            let yaml = """
                rules:
                  - name: ungzip
                    match: { port: \(port), path: /transformed }
                    response: { body: { replace: [{ text: "world", with: "proxy" }] } }
                """
            try await withRules(yaml) { proxy in
                let transformed = try await Hooks.curl(proxy, "http://127.0.0.1:\(port)/transformed")
                let expected = GzipOrigin.plainText.replacingOccurrences(of: "world", with: "proxy")
                #expect(transformed.status == 200)
                #expect(transformed.bodyText == expected)
                #expect(transformed.header("Content-Encoding") == nil, "\(transformed.headers)")
                #expect(transformed.header("Content-Length") == String(expected.utf8.count))

                // No transform: the compressed bytes stream through untouched.
                let untouched = try await Hooks.curl(proxy, "http://127.0.0.1:\(port)/other")
                #expect(untouched.header("Content-Encoding") == "gzip")
                #expect(untouched.body == GzipOrigin.gzipBytes)
            }
        }
    }

    @Test("delay_ms: the exchange still completes")
    func delay() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: slow
                    match: { port: \(origin.port) }
                    delay_ms: 150
                """
            try await withRules(yaml) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/echo", ["--data-binary", "late"])
                #expect(response.status == 200)
                #expect(response.bodyText == "late")
                #expect(origin.requests.count == 1)
                let records = await Hooks.records(proxy)
                #expect(records.first?.rules == ["slow"])
            }
        }
    }

    // MARK: precedence

    @Test("decisions: the first matching rule wins (across files); edits: every matching rule in file order")
    func precedence() async throws {
        try await withOrigin { origin in
            let first = """
                rules:
                  - name: a-respond
                    match: { port: \(origin.port), path: "/p/*" }
                    respond: { body: "from a\\n" }
                    response: { set_headers: { X-Order: a, X-A: "1" } }
                """
            let second = """
                rules:
                  - name: b-respond
                    match: { port: \(origin.port), path: "/p/*" }
                    respond: { body: "from b\\n" }
                    response: { set_headers: { X-Order: b, X-B: "1" } }
                  - name: c-map
                    match: { port: \(origin.port) }
                    map_remote: { to: "http://127.0.0.1:\(origin.port)/echo" }
                    response: { set_headers: { X-C: "1" } }
                """
            try await withRules([("20-b.yaml", second), ("10-a.yaml", first)]) { proxy in
                let local = try await Hooks.curl(proxy, "\(origin.baseURL)/p/x")
                #expect(local.bodyText == "from a\n")
                #expect(local.header("X-Order") == "b", "the later rule's edit applies last")
                #expect(local.header("X-A") == "1")
                #expect(local.header("X-B") == "1")
                #expect(local.header("X-C") == "1")
                #expect(origin.requests.isEmpty)

                let mapped = try await Hooks.curl(proxy, "\(origin.baseURL)/q", ["--data-binary", "to echo"])
                #expect(mapped.bodyText == "to echo")
                #expect(mapped.header("X-C") == "1")
                #expect(mapped.header("X-A") == nil)

                let records = await Hooks.records(proxy, count: 2)
                #expect(records.first?.rules == ["a-respond", "b-respond", "c-map"])
                #expect(records.last?.rules == ["c-map"])
            }
        }
    }

    // MARK: body limit

    @Test("a response body over --body-limit streams unchanged, and the log says so")
    func responseOverBodyLimit() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: would-transform
                    match: { port: \(origin.port) }
                    response: { body: { replace: [{ regex: ".", with: "x" }] } }
                """
            try await withRules(yaml, limits: ProxyLimits(bodyLimit: 4096)) { proxy in
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/bytes/100000")
                #expect(response.status == 200)
                #expect(isPattern(response.body, count: 100_000), "\(patternMismatch(response.body, count: 100_000))")
                let records = await Hooks.records(proxy)
                #expect(Hooks.eventTexts(records).contains("response body over --body-limit: streamed unchanged"),
                        "\(Hooks.eventTexts(records))")

                let small = try await Hooks.curl(proxy, "\(origin.baseURL)/echo", ["--data-binary", "abc"])
                #expect(small.bodyText == "xxx")
            }
        }
    }

    @Test("a request body over --body-limit is sent unchanged, and the log says so")
    func requestOverBodyLimit() async throws {
        try await withOrigin { origin in
            let yaml = """
                rules:
                  - name: would-transform
                    match: { port: \(origin.port) }
                    request: { body: { replace: [{ text: "a", with: "b" }] } }
                """
            try await withRules(yaml, limits: ProxyLimits(bodyLimit: 4096)) { proxy in
                let directory = try TemporaryDirectory()
                let body = [UInt8](repeating: UInt8(ascii: "a"), count: 50_000)
                let file = try directory.write(body, to: "body.bin")
                let response = try await Hooks.curl(proxy, "\(origin.baseURL)/sha256", ["--data-binary", "@\(file)"])
                #expect(response.bodyText == "\(sha256Hex(body)) 50000")
                let records = await Hooks.records(proxy)
                #expect(Hooks.eventTexts(records).contains("request body over --body-limit: sent unchanged"),
                        "\(Hooks.eventTexts(records))")
            }
        }
    }
}
