import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

@Suite struct ActionTests {
    @Test func mapRemoteTemplates() throws {
        let set = try ruleSet("""
        rules:
          - name: keep-path
            match: { host: a.test }
            map_remote: { to: "http://127.0.0.1:9000" }
          - name: placeholders
            match: { host: b.test }
            map_remote: { to: "http://{host}:8081/p{path}?{query}&from={scheme}-{port}" }
          - name: to-https
            match: { host: c.test }
            map_remote: { to: "https://secure.test:8443/fixed" }
        """)
        let a = set.plan(for: request("GET", "https://a.test/v1/u?x=1"))
        #expect(a.upstreamURL.description == "http://127.0.0.1:9000/v1/u?x=1")
        #expect(a.events.map(\.logText) == ["mapped → http://127.0.0.1:9000/v1/u?x=1"])
        #expect(a.mappedBy == "keep-path")
        let b = set.plan(for: request("GET", "https://b.test/q?y=2"))
        #expect(b.upstreamURL.description == "http://b.test:8081/p/q?y=2&from=https-443")
        let c = set.plan(for: request("GET", "http://c.test/anything"))
        #expect(c.upstreamURL == ProxyURL(scheme: "https", host: "secure.test", port: 8443, path: "/fixed"))
        let untouched = set.plan(for: request("GET", "http://d.test/"))
        #expect(untouched.upstreamURL.description == "http://d.test/")
        #expect(untouched.mappedBy == nil)
    }

    @Test func hostFollowsMapRemoteUnlessSet() throws {
        let set = try ruleSet("""
        rules:
          - name: map
            match: { host: a.test }
            map_remote: { to: "http://127.0.0.1:9000" }
          - name: map-with-host
            match: { host: b.test }
            map_remote: { to: "http://127.0.0.1:9000" }
            request: { set_headers: { Host: b.test } }
        """)
        var head = request("GET", "http://a.test/x", headers: [("Host", "a.test"), ("Accept", "*/*")])
        set.plan(for: head).editRequest(&head)
        #expect(head.headers["Host"] == "127.0.0.1:9000")
        #expect(head.url.description == "http://127.0.0.1:9000/x")
        var other = request("GET", "http://b.test/x", headers: [("Host", "b.test")])
        let plan = set.plan(for: other)
        plan.editRequest(&other)
        #expect(other.headers["Host"] == "b.test")
        #expect(plan.hostFromRules == "b.test")
    }

    @Test func respondInlineAndFile() throws {
        let set = try ruleSet("""
        rules:
          - name: file
            match: { path: /user }
            respond: { body_file: mocks/user.json, headers: { X-Mock: "1" } }
          - name: inline
            match: { path: /health }
            respond: { status: 201, body: "ok" }
          - name: typed
            match: { path: /typed }
            respond: { body_file: mocks/user.json, headers: { content-type: text/plain } }
        """, files: ["mocks/user.json": "{\"id\":1}"])
        let file = set.plan(for: request("GET", "http://x.test/user"))
        let local = try #require(file.localResponse)
        #expect(local.head.status == 200)
        #expect(local.head.headers["Content-Type"] == "application/json")
        #expect(local.head.headers["Content-Length"] == "8")
        #expect(local.head.headers["X-Mock"] == "1")
        #expect(String(decoding: local.body, as: UTF8.self) == "{\"id\":1}")
        #expect(file.events.map(\.logText) == ["responded from mocks/user.json"])
        let inline = try #require(set.plan(for: request("GET", "http://x.test/health")).localResponse)
        #expect(inline.head.status == 201)
        #expect(inline.head.reason == "Created")
        #expect(inline.body == Array("ok".utf8))
        let typed = try #require(set.plan(for: request("GET", "http://x.test/typed")).localResponse)
        #expect(typed.head.headers.values(for: "Content-Type") == ["text/plain"])
    }

    @Test func redirectClient() throws {
        let set = try ruleSet("""
        rules:
          - name: go
            match: { path_regex: "^/old/(.*)$" }
            redirect_client: { location: "http://localhost:9000/new/$1?{query}" }
          - name: perm
            match: { path: /p }
            redirect_client: { status: 308, location: "https://{host}{path}" }
        """)
        let plan = set.plan(for: request("GET", "http://x.test/old/a/b?q=1"))
        let local = try #require(plan.localResponse)
        #expect(local.head.status == 302)
        #expect(local.head.headers["Location"] == "http://localhost:9000/new/a/b?q=1")
        #expect(plan.events.map(\.logText) == ["redirected client → http://localhost:9000/new/a/b?q=1 (302)"])
        let perm = try #require(set.plan(for: request("GET", "http://x.test/p")).localResponse)
        #expect(perm.head.status == 308)
        #expect(perm.head.headers["Location"] == "https://x.test/p")
    }

    @Test func decisionsFirstWinsEditsAllInOrder() throws {
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("a.yaml", """
        rules:
          - name: first
            match: { host: "*.test" }
            map_remote: { to: "http://127.0.0.1:1" }
            request: { set_headers: { X-Order: first, X-A: a } }
            response: { set_headers: { X-Order: first }, status: 201 }
            delay_ms: 100
            on_redirect: { action: follow }
            trust: { pinning: none }
        """)
        dir.write("b.yaml", """
        rules:
          - name: second
            match: { host: api.test }
            respond: { body: never }
            request: { set_headers: { X-Order: second }, remove_headers: [X-A] }
            response: { set_headers: { X-Order: second }, remove_headers: [Server] }
            delay_ms: 50
            on_redirect: { action: block }
            on_challenge: { action: cancel }
        """)
        let set = try dir.loaded()
        let plan = set.plan(for: request("GET", "http://api.test/"))
        #expect(plan.firedRules == ["first", "second"])
        #expect(plan.localResponse == nil)
        #expect(plan.upstreamURL.description == "http://127.0.0.1:1/")
        #expect(plan.delayMs == 150)
        #expect(plan.onRedirect?.action == .follow)
        #expect(plan.onRedirect?.rule == "first")
        #expect(plan.onChallenge?.action == .cancel)
        #expect(plan.trust?.rule == "first")
        var head = request("GET", "http://api.test/", headers: [("X-A", "client")])
        plan.editRequest(&head)
        #expect(head.headers["X-Order"] == "second")
        #expect(!head.headers.contains("X-A"))
        var response = ResponseHead(status: 200, headers: [("Server", "s"), ("X-Order", "origin")])
        plan.editResponse(&response)
        #expect(response.status == 201)
        #expect(response.headers["X-Order"] == "second")
        #expect(!response.headers.contains("Server"))
    }

    @Test func responseEditsApplyToLocalAnswers() throws {
        let set = try ruleSet("""
        rules:
          - name: mock
            match: { path: /m }
            respond: { body: "hello world", headers: { X-Remove: me } }
          - name: edit
            match: { host: "*" }
            response:
              status: 202
              set_headers: { X-Edited: "yes" }
              remove_headers: [X-Remove]
              body: { replace: [{ text: world, with: there }] }
        """)
        let plan = set.plan(for: request("GET", "http://x.test/m"))
        let local = try #require(plan.localResponse)
        #expect(local.head.status == 202)
        #expect(local.head.headers["X-Edited"] == "yes")
        #expect(!local.head.headers.contains("X-Remove"))
        #expect(String(decoding: local.body, as: UTF8.self) == "hello there")
        #expect(local.head.headers["Content-Length"] == "11")
    }

    @Test func envExpansion() throws {
        let set = try ruleSet("""
        rules:
          - name: token
            request: { set_headers: { Authorization: "Bearer ${TOKEN}" } }
        """, env: ["TOKEN": "abc"])
        var head = request("GET", "http://x.test/")
        set.plan(for: head).editRequest(&head)
        #expect(head.headers["Authorization"] == "Bearer abc")
    }
}
