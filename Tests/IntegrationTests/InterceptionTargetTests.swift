import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// Which server a request inside an intercepted tunnel reaches: the one its CONNECT named, whatever the request's
/// `Host` or absolute-form target says (a client must not steer hookproxy to a host its CONNECT did not name).
/// Two TLS TestOrigins on 127.0.0.1:0; the client CONNECTs to the first and names the second inside TLS.
@Suite("Interception: the CONNECT authority is the only target", .timeLimit(.minutes(2)))
struct InterceptionTargetTests {
    let interception = InterceptionTests()

    @Test("an origin-form request whose Host names another server reaches the CONNECT host, its Host kept")
    func hostHeaderDoesNotSteer() async throws {
        try await withOrigin(tls: TestCA.shared.identity([TestCA.shared.leaf, TestCA.shared.intermediate])) { other in
            try await interception.intercepted(["127.0.0.1"]) { origin, proxy, ca in
                let request = "GET /head-test HTTP/1.1\r\nHost: 127.0.0.1:\(other.port)\r\nConnection: close\r\n\r\n"
                let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                        trustRoots: [ca.certificate], request: request)
                #expect(result.failure == nil, "\(result.failure ?? "")")
                #expect(result.status == 200, "\(result.response)")
                #expect(origin.requests.map(\.target) == ["/head-test"])
                #expect(origin.requests.first?.header("Host") == "127.0.0.1:\(other.port)")
                #expect(other.requests.isEmpty, "the server the CONNECT did not name got \(other.requests.map(\.target))")
                let records = await Hooks.records(proxy)
                #expect(records.first?.url == "https://127.0.0.1:\(origin.port)/head-test", "\(records.map(\.url))")
            }
        }
    }

    @Test("an absolute-form request naming another origin gets 421, and no server gets it")
    func absoluteFormElsewhereIsMisdirected() async throws {
        try await withOrigin(tls: TestCA.shared.identity([TestCA.shared.leaf, TestCA.shared.intermediate])) { other in
            try await interception.intercepted(["127.0.0.1"]) { origin, proxy, ca in
                for target in ["https://127.0.0.1:\(other.port)/head-test", "http://127.0.0.1:\(origin.port)/head-test"] {
                    let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\nConnection: close\r\n\r\n"
                    let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                            trustRoots: [ca.certificate], request: request)
                    #expect(result.status == 421, "\(target): \(result.response)")
                    #expect(result.body.contains("misdirected request"), "\(result.body)")
                }
                #expect(origin.requests.isEmpty && other.requests.isEmpty,
                        "\(origin.requests.map(\.target)) \(other.requests.map(\.target))")
                let same = "GET https://127.0.0.1:\(origin.port)/head-test HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                        trustRoots: [ca.certificate], request: same)
                #expect(result.status == 200, "the tunnel's own origin in absolute form: \(result.response)")
                #expect(origin.requests.first?.header("Host") == "127.0.0.1:\(origin.port)")
            }
        }
    }

    /// A review's find: a CONNECT inside the intercepted tunnel got `200` and opened a second tunnel to the host it
    /// named, so the request after it reached a server the outer CONNECT never named.
    @Test("a CONNECT inside an intercepted tunnel gets 421 and opens nothing; the server it names gets nothing")
    func nestedConnectIsMisdirected() async throws {
        try await withOrigin(tls: TestCA.shared.identity([TestCA.shared.leaf, TestCA.shared.intermediate])) { other in
            try await interception.intercepted(["127.0.0.1"]) { origin, proxy, ca in
                let request = "CONNECT 127.0.0.1:\(other.port) HTTP/1.1\r\nHost: 127.0.0.1:\(other.port)\r\n\r\n"
                    + "GET /head-test HTTP/1.1\r\nHost: 127.0.0.1:\(other.port)\r\nConnection: close\r\n\r\n"
                let result = try await TunnelClient.get(proxyPort: proxy.port, host: "127.0.0.1", port: origin.port,
                                                        trustRoots: [ca.certificate], request: request)
                #expect(result.status == 421, "\(result.response)")
                #expect(result.body.contains("misdirected request"), "\(result.body)")
                #expect(other.requests.isEmpty && origin.requests.isEmpty,
                        "\(other.requests.map(\.target)) \(origin.requests.map(\.target))")
            }
        }
    }
}
