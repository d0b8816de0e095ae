import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 11, item 14: a `trust` rule is never weaker than curl's default verification. Through real sockets like
/// TrustCasesTests (a TLS TestOrigin, rule `t.test` → `https://localhost:PORT`, curl through hookproxy).
@Suite("trust strictness (issue 11)", .timeLimit(.minutes(2)))
struct TrustStrictnessTests {
    static let ca = TestCA.shared
    let cases = TrustCasesTests()

    @Test("a leaf whose only EKU is clientAuth is no server certificate: rejected before any request byte")
    func clientAuthOnlyLeafRejected() async throws {
        let ca = Self.ca
        try await cases.reject(server: [ca.clientAuthLeaf, ca.intermediate],
                               TrustCasesTests.Trust(store: [ca.root]),
                               reason: ["step 1", "chain", "unsuitable certificate purpose"])
        // Pinning its key does not make it valid either (step 2 still wants a valid chain).
        try await cases.reject(server: [ca.clientAuthLeaf, ca.intermediate],
                               TrustCasesTests.Trust(pinning: "public_key", pins: [ca.clientAuthLeaf], store: [ca.root]),
                               reason: ["step 2", "unsuitable certificate purpose"])
        // The same chain with a serverAuth leaf passes (the store and the intermediate are fine).
        try await cases.accept(server: [ca.leaf, ca.intermediate], TrustCasesTests.Trust(store: [ca.root]),
                               detail: ["step 1"])
    }

    @Test("a ca_file replaced on disk takes effect when the rules reload: R accepts, U rejects, R accepts again")
    func caFileReloaded() async throws {
        let ca = Self.ca
        try await withOrigin(tls: ca.identity([ca.leaf, ca.intermediate])) { origin in
            let directory = try TemporaryDirectory()
            let caFile = try directory.writePEM([ca.root], to: "store/ca.pem")
            let yaml = """
                rules:
                  - name: trust-ca-file
                    match: { host: t.test }
                    map_remote: { to: "https://localhost:\(origin.port)" }
                    trust: { ca_file: "\(caFile)" }

                """
            let store = try Hooks.store(directory, yaml)
            try await withHookProxy(rules: store) { proxy in
                let first = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(first.status == 200, "\(first.bodyText)")
                #expect(origin.requests.count == 1)

                try directory.writePEM([ca.unrelatedRoot], to: "store/ca.pem")
                try directory.write(yaml + "# edited\n", to: "rules/rules.yaml")
                guard case .success = store.reload() else {
                    Issue.record("reload failed")
                    return
                }
                let second = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(second.status == 502, "\(second.bodyText)")
                #expect(second.bodyText.hasPrefix("hookproxy: trust rejected localhost: step 1: chain"), "\(second.bodyText)")
                #expect(origin.requests.count == 1, "the rejected flow sent no request")

                try directory.writePEM([ca.root], to: "store/ca.pem")
                try directory.write(yaml, to: "rules/rules.yaml")
                guard case .success = store.reload() else {
                    Issue.record("reload failed")
                    return
                }
                let third = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(third.status == 200, "\(third.bodyText)")
                #expect(origin.requests.count == 2)
                let actions = await Hooks.records(proxy, count: 3).flatMap(\.events).filter { $0.hook == .trust }.map(\.action)
                #expect(actions == ["trust accepted", "trust rejected", "trust accepted"])
            }
        }
    }
}
