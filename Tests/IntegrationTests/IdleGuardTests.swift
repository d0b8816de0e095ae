import Foundation
@testable import ProxyServer
import ProxyTestSupport
@testable import ProxyUpstream
import Testing

/// The idle-connection guard (LoopEngine) watches only connections curl keeps: a review helper saw a cancelled
/// transfer's connection, closed by curl, added to the watch by its number, which another thread's accept then
/// reused: the guard shut an innocent client's socket.
@Suite("idle-connection guard", .timeLimit(.minutes(2)))
struct IdleGuardTests {
    @Test("a transfer cancelled after a challenge answered with use_credential leaves no socket in the idle watch")
    func cancelledTransferIsNotWatched() async throws {
        try await withOrigin { origin in
            let directory = try TemporaryDirectory()
            let store = try Hooks.store(directory, ChallengeHookTests.useCredential())
            try await withHookProxy(rules: store) { proxy in
                let path = ChallengeHookTests.authPath("basic") + "&chunks=200"
                try await withRawClient(proxy) { client in
                    try await client.send(rawRequest("GET \(origin.baseURL)\(path) HTTP/1.1", ["Host: 127.0.0.1:\(origin.port)"]))
                    _ = try await client.read(atLeast: 3000)  // the head and some of the long answer
                }
                let engine = proxy.server.context.engine
                #expect(await eventually(timeout: .seconds(10)) { origin.connections.allSatisfy(\.closed) },
                        "the cancelled transfer's connection is closed")
                let watched = await engine.idleWatchedSockets()
                #expect(watched.isEmpty, "watched after the cancel: \(watched)")
            }
        }
    }
}
