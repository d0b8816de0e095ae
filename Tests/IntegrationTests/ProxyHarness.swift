import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport

/// Starts hookproxy in-process on 127.0.0.1:0 for a test and records every finished exchange.
/// `stop()` must be called (tests use `defer`-like `withProxy`).
final class ProxyHarness: Sendable {
    let server: ProxyServer
    let recorder: RecordingRecorder

    var port: Int { server.port }
    /// `http://127.0.0.1:PORT`, for curl's `-x`.
    var proxyURL: String { server.url }

    static func start(_ configure: (inout ProxyConfiguration) -> Void = { _ in }) async throws -> ProxyHarness {
        let recorder = RecordingRecorder()
        var configuration = ProxyConfiguration(host: "127.0.0.1", port: 0)
        configuration.recorder = recorder
        configure(&configuration)
        if configuration.recorder == nil { configuration.recorder = recorder }
        let server = try await ProxyServer.start(configuration)
        return ProxyHarness(server: server, recorder: recorder)
    }

    private init(server: ProxyServer, recorder: RecordingRecorder) {
        self.server = server
        self.recorder = recorder
    }

    func stop() async {
        await server.shutdown()
    }
}

/// Runs `body` with a started proxy and always stops it.
func withProxy<T>(_ configure: (inout ProxyConfiguration) -> Void = { _ in },
                         _ body: (ProxyHarness) async throws -> T) async throws -> T {
    let proxy = try await ProxyHarness.start(configure)
    do {
        let result = try await body(proxy)
        await proxy.stop()
        return result
    } catch {
        await proxy.stop()
        throw error
    }
}
