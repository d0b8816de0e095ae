import Foundation
import ProxyModel
import ProxyTestSupport
import Testing

/// 1xx responses an upstream sends before its final one (103 Early Hints, 102 Processing) reach the client, as RFC
/// 9110 §15.2 asks of a proxy: hookproxy dropped them all, so a browser behind it never saw its Early Hints. Not to an
/// HTTP/1.0 client, which would read one as the response; not a 100, which hookproxy answers itself.
@Suite("Informational responses from the upstream", .timeLimit(.minutes(2)))
struct InformationalResponseTests {
    static let script: [MisbehavingOrigin.Step] = [
        .text("HTTP/1.1 102 Processing\r\n\r\n"),
        .text("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n"),
        .text("HTTP/1.1 100 Continue\r\n\r\n"),
        .text("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"),
    ]

    private func rawAnswer(version: String, _ script: [MisbehavingOrigin.Step] = script) async throws
        -> (answer: String, record: FlowRecord?) {
        try await MisbehavingOrigin.with(script) { origin in
            try await withProxy { proxy in
                let answer = try await rawGET("\(origin.baseURL)/page", host: "127.0.0.1:\(origin.port)", through: proxy,
                                              version: version)
                return (answer, await proxy.recorder.waitFor(count: 1).first)
            }
        }
    }

    @Test("HTTP/1.1: 102 and 103 go before the 200, without hop-by-hop fields; the upstream's 100 does not")
    func http11() async throws {
        let (answer, record) = try await rawAnswer(version: "HTTP/1.1")
        let heads = answer.components(separatedBy: "\r\n\r\n")
        #expect(heads.count == 4, "\(answer)")
        #expect(heads.first == "HTTP/1.1 102 Processing", "\(answer)")
        let hints = heads.count > 1 ? heads[1] : ""
        #expect(hints.hasPrefix("HTTP/1.1 103 Early Hints\r\n"), "\(answer)")
        #expect(hints.contains("\r\nLink: </style.css>; rel=preload; as=style"), "\(hints)")
        #expect(!hints.lowercased().contains("x-hop") && !hints.lowercased().contains("connection"), "\(hints)")
        #expect(heads.count > 2 && heads[2].hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer)")
        #expect(answer.hasSuffix("\r\n\r\nok"), "\(answer)")
        #expect(!answer.contains(" 100 "), "\(answer)")
        let events = record?.events.filter { $0.hook == .upstream }.map(\.logText) ?? []
        #expect(events == ["102 Processing forwarded", "103 Early Hints forwarded"], "\(String(describing: record?.events))")
        #expect(record?.response?.status == 200)
    }

    @Test("HTTP/1.1 keep-alive: a second request on the connection gets its own 103 and 200")
    func keepAlive() async throws {
        try await MisbehavingOrigin.with(Self.script) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    for path in ["/one", "/two"] {
                        try await client.send(rawRequest("GET \(origin.baseURL)\(path) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                        let statuses = [try await client.readResponse(), try await client.readResponse(),
                                        try await client.readResponse()]
                        #expect(statuses.map(\.status) == [102, 103, 200], "\(path): \(statuses.map(\.rawHead))")
                        #expect(statuses.last?.body == Array("ok".utf8))
                    }
                }
            }
        }
    }

    @Test("HTTP/1.0: only the final response, and the log says why")
    func http10() async throws {
        let (answer, record) = try await rawAnswer(version: "HTTP/1.0")
        #expect(answer.hasPrefix("HTTP/1.0 200 OK\r\n") && answer.hasSuffix("\r\n\r\nok"), "\(answer)")
        #expect(!answer.contains(" 103 ") && !answer.contains(" 102 "), "\(answer)")
        let events = record?.events.filter { $0.hook == .upstream }.map(\.logText) ?? []
        #expect(events == ["102 Processing not forwarded: an HTTP/1.0 client",
                           "103 Early Hints not forwarded: an HTTP/1.0 client"], "\(events)")
    }

    @Test("a 1xx without a standard reason is noted by its code alone, and keeps its own reason phrase")
    func unnamedStatus() async throws {
        let (answer, record) = try await rawAnswer(version: "HTTP/1.1", [
            .text("HTTP/1.1 199 Whatever\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        #expect(answer.hasPrefix("HTTP/1.1 199 Whatever\r\n"), "\(answer)")
        let events = record?.events.filter { $0.hook == .upstream }.map(\.logText) ?? []
        #expect(events == ["199 forwarded"], "\(events)")
    }

    @Test("a 1xx with a control character in a field is dropped; the final response is untouched")
    func brokenInformational() async throws {
        let (answer, record) = try await rawAnswer(version: "HTTP/1.1", [
            .text("HTTP/1.1 103 Early Hints\r\nLink: </a\u{1B}.css>\r\n\r\n"),
            .text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("\r\n\r\nok"), "\(answer)")
        let events = record?.events.filter { $0.hook == .upstream }.map(\.logText) ?? []
        #expect(events.count == 1 && events[0].hasPrefix("103 Early Hints not forwarded: invalid value of header 'Link'"), "\(events)")
    }

    @Test("an upstream that sends 1xx after 1xx: eight reach the client, then one event says the rest were dropped")
    func flood() async throws {
        let hints = String(repeating: "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", count: 2000)
        let (answer, record) = try await rawAnswer(version: "HTTP/1.1", [
            .text(hints + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ])
        #expect(answer.components(separatedBy: "HTTP/1.1 103 Early Hints\r\n").count - 1 == 8, "\(answer.prefix(300))")
        #expect(answer.hasSuffix("\r\n\r\nok"), "\(answer.suffix(200))")
        let events = record?.events.filter { $0.hook == .upstream }.map(\.logText) ?? []
        #expect(events.count == 9 && events.last == "further 1xx responses dropped: 8 came before them", "\(events)")
    }

    @Test("HTTP/2 through interception: curl sees the 103 and its link before the 200")
    func http2() async throws {
        let identity = TestCA.shared.identity([TestCA.shared.leaf, TestCA.shared.intermediate])
        try await MisbehavingOrigin.with(Self.script, tls: identity) { origin in
            try await withInterceptingProxy { proxy, caPath in
                let result = try await CurlCLI.run([
                    "-s", "-S", "-v", "--http2", "--max-time", "20", "-x", proxy.proxyURL, "--cacert", caPath,
                    "https://localhost:\(origin.port)/page",
                ])
                #expect(result.exitCode == 0, "\(result.stderr)")
                #expect(result.stdoutText == "ok", "\(result.stderr)")
                let lines = result.stderr.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                let hints = lines.firstIndex { $0.hasPrefix("< HTTP/2 103") }
                let link = lines.firstIndex { $0.lowercased().hasPrefix("< link: </style.css>") }
                let final = lines.firstIndex { $0.hasPrefix("< HTTP/2 200") }
                #expect(hints != nil && link != nil && final != nil, "\(result.stderr)")
                if let hints, let link, let final { #expect(hints < link && link < final, "\(result.stderr)") }
            }
        }
    }
}
