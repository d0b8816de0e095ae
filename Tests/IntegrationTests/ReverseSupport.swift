import Foundation
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

// Helpers for the issue-18 reverse-proxy tests: hookproxy in-process with `--reverse` routes built once the origin's
// port is known, and curl pointed straight at a reverse listener (no -x: the client does not know a proxy is there).

enum Reverse {
    /// `curl -s -S -i URL …` straight at a listener, bounded, without Expect: 100-continue.
    static func curl(_ url: String, _ extra: [String] = []) async throws -> CurlResponse {
        let result = try await CurlCLI.run(["-s", "-S", "-i", "--max-time", "20", "-H", "Expect:"] + extra + [url],
                                           timeout: .seconds(30))
        return CurlResponse(result)
    }

    /// curl flags that make `https://localhost:PORT` reach 127.0.0.1 (the listener binds IPv4 only) and trust `ca`.
    static func tlsFlags(port: Int, ca: String) -> [String] {
        ["--resolve", "localhost:\(port):127.0.0.1", "--cacert", ca]
    }

    /// A port that was free a moment ago (for a route that must name its own listener's port up front).
    static func freePort() throws -> Int {
        try RefusingPort().port  // the socket closes when the value goes away
    }
}

/// hookproxy in-process with the `--reverse` routes `routes` (parsed like the flag), rules `yaml` (none when nil),
/// the CA in `directory/ca`, and `configure` applied last; `body` gets the proxy and its bound reverse listeners.
func withReverseProxy<T>(_ routes: [String], rules yaml: String? = nil, in directory: TemporaryDirectory,
                         _ configure: (inout ProxyConfiguration) -> Void = { _ in },
                         _ body: (ProxyHarness, [ReverseListener]) async throws -> T) async throws -> T {
    let store = try yaml.map { try Hooks.store(directory, $0) }
    let parsed = try routes.map { try ReverseRoute(parsing: $0) }
    return try await withHookProxy(rules: store, { configuration in
        configuration.reverseRoutes = parsed
        configuration.caDirectory = directory.path + "/ca"
        configure(&configuration)
    }) { proxy in
        try await body(proxy, proxy.server.reverseListeners)
    }
}

/// The message `ProxyServer.start` throws for `configuration`, or nil when it starts (it is then stopped at once).
func startFailure(_ configure: (inout ProxyConfiguration) -> Void) async -> String? {
    do {
        let proxy = try await ProxyHarness.start(configure)
        await proxy.stop()
        return nil
    } catch {
        return "\(error)"
    }
}
