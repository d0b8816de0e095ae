import Foundation
import ProxyServer
import ProxyTestSupport
import Testing

/// Runs `body` with a started TestOrigin and always shuts it down.
func withOrigin<T>(tls: TestTLSIdentity? = nil, _ body: (TestOrigin) async throws -> T) async throws -> T {
    let origin = try await TestOrigin.start(tls: tls)
    do {
        let result = try await body(origin)
        try await origin.shutdown()
        return result
    } catch {
        try? await origin.shutdown()
        throw error
    }
}

/// A TestOrigin and an in-process proxy, both stopped whatever happens.
func withProxyAndOrigin<T>(_ configure: (inout ProxyConfiguration) -> Void = { _ in },
                           _ body: (ProxyHarness, TestOrigin) async throws -> T) async throws -> T {
    try await withOrigin { origin in
        try await withProxy(configure) { proxy in try await body(proxy, origin) }
    }
}

/// A raw client connected to the proxy, closed after `body` whatever happens.
func withRawClient<T>(_ proxy: ProxyHarness, readTimeout: Duration = .seconds(10), sending first: String? = nil,
                      _ body: (RawClient) async throws -> T) async throws -> T {
    // With `first`, connecting and sending are one step: a proxy with a short --idle-timeout closes a connection
    // that stays silent, and a busy cooperative pool can hold a test between two awaits for over a second.
    let client = if let first {
        try await RawClient.connect(port: proxy.port, readTimeout: readTimeout, sending: first)
    } else {
        try await RawClient.connect(port: proxy.port, readTimeout: readTimeout)
    }
    defer { client.close() }
    return try await body(client)
}

/// What a raw client gets, to the end, for one `GET target` (with `Connection: close`) through `proxy`.
func rawGET(_ target: String, host: String, through proxy: ProxyHarness, version: String = "HTTP/1.1",
            headers: [String] = []) async throws -> String {
    try await withRawClient(proxy) { client in
        try await client.send(rawRequest("GET \(target) \(version)", ["Host: \(host)", "Connection: close"] + headers))
        return String(decoding: try await client.readToEOF(), as: UTF8.self)
    }
}

/// `curl -s -S -x PROXY args…` through the proxy.
func curlThrough(_ proxy: ProxyHarness, _ args: [String], timeout: Duration = .seconds(30)) async throws -> CurlCLI.Result {
    try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL] + args, timeout: timeout)
}

/// Checks that the proxy still answers a plain GET through a fresh connection (after a bad input).
func expectProxyStillServes(_ proxy: ProxyHarness, _ origin: TestOrigin,
                            sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let result = try await curlThrough(proxy, ["\(origin.baseURL)/bytes/1000"])
    #expect(result.exitCode == 0, "curl after a bad input: \(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.stdout == pattern(count: 1000), "body after a bad input", sourceLocation: sourceLocation)
}

/// The repository root (the directory holding Package.swift and Makefile) found from this file's path.
func repositoryRoot(filePath: String = #filePath) -> URL {
    var dir = URL(fileURLWithPath: filePath).deletingLastPathComponent()
    let fm = FileManager.default
    while dir.path != "/" && !(fm.fileExists(atPath: dir.appendingPathComponent("Package.swift").path)
                               && fm.fileExists(atPath: dir.appendingPathComponent("Makefile").path)) {
        dir.deleteLastPathComponent()
    }
    return dir
}
