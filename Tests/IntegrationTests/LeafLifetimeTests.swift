import Foundation
import NIOCore
import NIOPosix
import NIOSSL
@testable import ProxyServer
import ProxyTestSupport
import Testing

/// The leaves interception presents stay valid however long hookproxy runs: never past the CA's own end, and minted
/// anew half-way through their validity instead of served from the cache until they expire.
@Suite("Interception: leaf lifetimes", .timeLimit(.minutes(1)))
struct LeafLifetimeTests {
    @Test("a leaf never outlives the CA that signs it")
    func leafWithinCA() throws {
        let directory = try TemporaryDirectory()
        let ca = try TestCA.shared.ca(notBefore: Date() - 86_400, notAfter: Date() + 2 * 86_400)
        try directory.write(ca.pem, to: CertificateAuthority.certificateFile, permissions: 0o600)
        try directory.write(ca.privateKeyPEM, to: CertificateAuthority.keyFile, permissions: 0o600)
        let authority = try CertificateAuthority.loadOrCreate(directory: directory.path)
        let leaf = try authority.mintLeaf(for: "api.example.test").chain[0]
        let caEnd = Int(authority.certificate.notValidAfter.timeIntervalSince1970)
        #expect(Int(leaf.notValidAfter) <= caEnd, "the leaf ends \(leaf.notValidAfter), its CA \(caEnd)")
    }

    @Test("a cached leaf is used for the first half of its validity, then minted anew")
    func cachedLeafRenewed() async throws {
        let directory = try TemporaryDirectory()
        let pool = LazyThreadPool(numberOfThreads: 1)
        defer { Task { try await pool.shutdown(wait: false) } }
        let contexts = InterceptionContexts(ca: LazyCertificateAuthority(directory: directory.path + "/ca"), pool: pool,
                                            leafLifetime: .seconds(6))
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let minted = ContinuousClock.now
        _ = try await contexts.context(for: "api.example.test", on: loop).get()
        _ = try await contexts.context(for: "api.example.test", on: loop).get()
        #expect(contexts.signings == 1, "a fresh leaf is reused")
        try await Task.sleep(until: minted + .seconds(3.5))
        _ = try await contexts.context(for: "api.example.test", on: loop).get()
        #expect(contexts.signings == 2, "past half its validity, the leaf is minted anew")
    }
}
