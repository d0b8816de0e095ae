import Foundation
import NIOConcurrencyHelpers
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyUpstream
import Synchronization

/// Starts hookproxy in-process on 127.0.0.1:0 for a test and records every finished exchange.
/// `stop()` must be called (tests use `defer`-like `withProxy`).
public final class ProxyHarness: Sendable {
    public let server: ProxyServer
    public let recorder: RecordingRecorder

    public var port: Int { server.port }
    /// `http://127.0.0.1:PORT`, for curl's `-x`.
    public var proxyURL: String { server.url }

    public static func start(_ configure: (inout ProxyConfiguration) -> Void = { _ in }) async throws -> ProxyHarness {
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

    public func stop() async {
        await server.shutdown()
    }
}

/// Runs `body` with a started proxy and always stops it.
public func withProxy<T>(_ configure: (inout ProxyConfiguration) -> Void = { _ in },
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

/// Keeps every FlowRecord it is given, for assertions.
public final class RecordingRecorder: FlowRecorder, Sendable {
    private let box = Mutex<[FlowRecord]>([])
    public init() {}
    public func record(_ flow: FlowRecord) { box.withLock { $0.append(flow) } }
    public var records: [FlowRecord] { box.withLock { $0 } }

    /// Waits (bounded) until at least `count` records arrived.
    public func waitFor(count: Int, timeout: Duration = .seconds(10)) async -> [FlowRecord] {
        let deadline = ContinuousClock.now + timeout
        while records.count < count && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return records
    }
}
