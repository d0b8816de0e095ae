import Foundation
@testable import ProxyServer
import ProxyTestSupport
@testable import ProxyUpstream
import Testing

/// The idle-connection guard (LoopEngine) watches only connections curl keeps: a review helper saw a cancelled
/// transfer's connection, closed by curl, added to the watch by its number, which another thread's accept then
/// reused: the guard shut an innocent client's socket. And it lets go of a connection the moment curl hands it to a
/// request: a download cut short in a busy full run showed the guard shutting a connection in use.
@Suite("idle-connection guard", .timeLimit(.minutes(2)))
struct IdleGuardTests {
    /// curl reuses the cached connection for the next request, sends it, and finds the response there in the same
    /// call; its client still has bytes to take, so the transfer is paused before curl asks to watch the socket. The
    /// guard still watched it as idle, took the response for bytes no request asked for, and shut it: curl then
    /// reported `transfer closed with N bytes remaining`. It needs the response to win a race of microseconds, so
    /// the test makes many such requests; on the old code about 1 in 100 was cut under load (and in the full run).
    @Test("a cached connection handed to the next request is never shut as idle, even when its transfer pauses at once")
    func reusedConnectionIsNotIdle() async throws {
        try await withProxyAndOrigin { proxy, origin in
            for round in 0..<4 {
                let urls = (0..<40).flatMap { ["-o", "/dev/null", "\(origin.baseURL)/bytes/\(1 << 20)?r=\(round)&n=\($0)"] }
                let result = try await CurlCLI.run(["-s", "-S", "-x", proxy.proxyURL] + urls, timeout: .seconds(120))
                #expect(result.exitCode == 0, "round \(round): \(result.stderr)")
                #expect(!result.stderr.contains("transfer closed"), "round \(round): \(result.stderr)")
            }
        }
    }

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
