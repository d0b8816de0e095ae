import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Every row of ../shared/TRUST-CASES.md, one test each, through real sockets: a TLS TestOrigin presenting the row's
/// chain, a rule `match: {host: t.test}` + `map_remote: https://localhost:PORT` + the row's `trust`, and
/// `curl -x hookproxy http://t.test/head-test`. hookproxy is the TLS client, so the trust hook judges the chain.
@Suite("trust cases (TRUST-CASES.md)", .timeLimit(.minutes(2)))
struct TrustCasesTests {
    static let ca = TestCA.shared
    var R: TestCertificate { Self.ca.root }
    var I: TestCertificate { Self.ca.intermediate }
    var L: TestCertificate { Self.ca.leaf }
    var W: TestCertificate { Self.ca.wrongName }
    var E: TestCertificate { Self.ca.expired }
    var U: TestCertificate { Self.ca.unrelatedRoot }
    var UL: TestCertificate { Self.ca.unrelatedLeaf }
    var S: TestCertificate { Self.ca.selfSigned }
    var N: TestCertificate { Self.ca.noDomains }

    // MARK: rows

    @Test("trust 01: default allows valid chain")
    func row01() async throws {
        try await accept(server: [L, I], Trust(store: [R]), detail: ["step 1"])
    }

    @Test("trust 02: default rejects invalid (unknown root)")
    func row02() async throws {
        try await reject(server: [S], Trust(), reason: ["step 1", "chain"])
    }

    @Test("trust 03: default rejects invalid domain")
    func row03() async throws {
        try await reject(server: [W, I], Trust(store: [R]), reason: ["step 1", "host name"])
    }

    @Test("trust 04: domain validation off allows invalid domain")
    func row04() async throws {
        try await accept(server: [W, I], Trust(store: [R], vd: false), detail: ["step 1"])
    }

    @Test("trust 05: PK leaf pinned")
    func row05() async throws {
        try await accept(server: [L, I], Trust(pinning: "public_key", pins: [L], store: [R]),
                         detail: ["step 4", L.spkiPin])
    }

    @Test("trust 06: PK intermediate pinned")
    func row06() async throws {
        try await accept(server: [L, I], Trust(pinning: "public_key", pins: [I], store: [R]),
                         detail: ["step 4", I.spkiPin])
    }

    @Test("trust 07: PK root pinned (root not presented: the built chain ends at R)")
    func row07() async throws {
        try await accept(server: [L, I], Trust(pinning: "public_key", pins: [R], store: [R]),
                         detail: ["step 4", R.spkiPin])
    }

    @Test("trust 08: PK whole chain pinned")
    func row08() async throws {
        try await accept(server: [L, I, R], Trust(pinning: "public_key", pins: [L, I, R], store: [R]),
                         detail: ["step 4"])
    }

    @Test("trust 09: PK extra unrelated pin")
    func row09() async throws {
        try await accept(server: [L, I], Trust(pinning: "public_key", pins: [L, S], store: [R]),
                         detail: ["step 4", L.spkiPin])
    }

    @Test("trust 10: PK empty pin set is a load error")
    func row10() async throws {
        try await loadError(Trust(pinning: "public_key", pins: []),
                            message: ["pinning: public_key with no pins or certificates can never pass"])
    }

    @Test("trust 11: PK unrelated chain")
    func row11() async throws {
        try await reject(server: [UL], Trust(pinning: "public_key", pins: [L], store: [U]),
                         reason: ["step 4", "no pinned public key"])
    }

    @Test("trust 12: PK pinned but invalid domain")
    func row12() async throws {
        try await reject(server: [W, I], Trust(pinning: "public_key", pins: [W], store: [R]),
                         reason: ["step 2", "host name"])
    }

    @Test("trust 13: PK several wrong pins")
    func row13() async throws {
        try await reject(server: [UL], Trust(pinning: "public_key", pins: [L, S], store: [U]),
                         reason: ["step 4", "no pinned public key"])
    }

    @Test("trust 14: Cert leaf pinned")
    func row14() async throws {
        try await accept(server: [L, I], Trust(pinning: "certificate", certificates: [L], store: [R]),
                         detail: ["step 3", "pinned certificate", L.subject])
    }

    @Test("trust 15: Cert intermediate pinned")
    func row15() async throws {
        try await accept(server: [L, I], Trust(pinning: "certificate", certificates: [I], store: [R]),
                         detail: ["step 3", "pinned certificate", I.subject])
    }

    @Test("trust 16: Cert root pinned")
    func row16() async throws {
        try await accept(server: [L, I], Trust(pinning: "certificate", certificates: [R], store: [R]),
                         detail: ["step 3", "pinned certificate", R.subject])
    }

    @Test("trust 17: Cert whole chain pinned")
    func row17() async throws {
        try await accept(server: [L, I, R], Trust(pinning: "certificate", certificates: [L, I, R], store: [R]),
                         detail: ["step 3", "pinned certificate"])
    }

    @Test("trust 18: Cert extra unrelated cert")
    func row18() async throws {
        try await accept(server: [L, I], Trust(pinning: "certificate", certificates: [L, S], store: [R]),
                         detail: ["step 3", "pinned certificate", L.subject])
    }

    @Test("trust 19: Cert empty set is a load error (empty list and empty directory)")
    func row19() async throws {
        try await loadError(Trust(pinning: "certificate", certificates: []),
                            message: ["pinning: certificate with no certificates can never pass"])
        try await loadError(Trust(pinning: "certificate", certificates: [], certificatesAsDirectory: true),
                            message: ["pinning: certificate with no certificates can never pass"])
    }

    @Test("trust 20: Cert unrelated chain")
    func row20() async throws {
        try await reject(server: [UL], Trust(pinning: "certificate", certificates: [L], store: [U]),
                         reason: ["step 3"])
    }

    @Test("trust 21: Cert pinned but invalid domain")
    func row21() async throws {
        try await reject(server: [W, I], Trust(pinning: "certificate", certificates: [W], store: [R]),
                         reason: ["host name"])
    }

    @Test("trust 22: Cert pins-only rule is a load error")
    func row22() async throws {
        try await loadError(Trust(pinning: "certificate", pins: [L]),
                            message: ["'pins' are public-key hashes", "'pinning: certificate' takes 'certificates'"])
    }

    @Test("trust 23: self-signed, PK pinned, AI")
    func row23() async throws {
        try await accept(server: [S], Trust(pinning: "public_key", pins: [S], ai: true),
                         detail: ["step 4", S.spkiPin])
    }

    @Test("trust 24: self-signed, PK pinned, AI, VD off")
    func row24() async throws {
        try await accept(server: [S], Trust(pinning: "public_key", pins: [S], ai: true, vd: false),
                         detail: ["step 4", S.spkiPin])
    }

    @Test("trust 25: self-signed no-domain, Cert pinned, AI")
    func row25() async throws {
        try await reject(server: [N], Trust(pinning: "certificate", certificates: [N], ai: true),
                         reason: ["step 3", "host name"])
    }

    @Test("trust 26: self-signed, Cert pinned, AI")
    func row26() async throws {
        try await accept(server: [S], Trust(pinning: "certificate", certificates: [S], ai: true),
                         detail: ["step 3", "pinned certificate"])
    }

    @Test("trust 27: self-signed, none, AI, VD off")
    func row27() async throws {
        try await accept(server: [S], Trust(ai: true, vd: false), detail: ["step 1"])
    }

    @Test("trust 28: self-signed, default")
    func row28() async throws {
        try await reject(server: [S], Trust(), reason: ["step 1", "chain"])
    }

    @Test("trust 29: self-signed, Cert pinned, AI false")
    func row29() async throws {
        try await reject(server: [S], Trust(pinning: "certificate", certificates: [S]), reason: ["step 2", "chain"])
    }

    @Test("trust 30: AI + VD without pinning is a load error")
    func row30() async throws {
        try await loadError(Trust(ai: true), message: [
            "allow_invalid_certificates with validate_domain_name and no pinning can never pass",
            "validate_domain_name: false",
        ])
    }

    @Test("trust 31: AI + VD, mode none, certs given is a load error")
    func row31() async throws {
        try await loadError(Trust(certificates: [S], ai: true), message: [
            "allow_invalid_certificates with validate_domain_name and no pinning can never pass",
        ])
    }

    @Test("trust 32: AI + VD, public_key, empty pins is a load error")
    func row32() async throws {
        try await loadError(Trust(pinning: "public_key", pins: [], ai: true), message: ["can never pass"])
    }

    @Test("trust 33: expired leaf, default")
    func row33() async throws {
        try await reject(server: [E, I], Trust(store: [R]), reason: ["step 1", "chain", "expired"])
    }

    @Test("trust 34: expired leaf, PK pinned, AI")
    func row34() async throws {
        try await accept(server: [E, I], Trust(pinning: "public_key", pins: [E], ai: true),
                         detail: ["step 4", E.spkiPin])
    }

    @Test("trust 35: expired leaf, Cert pinned, AI")
    func row35() async throws {
        try await reject(server: [E, I], Trust(pinning: "certificate", certificates: [E], ai: true),
                         reason: ["step 3", "expired"])
    }

    @Test("trust 36: policy change on a reused connection (pin L, hot reload to pin S)")
    func row36() async throws {
        try await withOrigin(tls: Self.ca.identity([L, I])) { origin in
            let directory = try TemporaryDirectory()
            let first = Trust(pinning: "public_key", pins: [L], store: [R])
            let store = try Hooks.store(directory, try first.ruleFile(port: origin.port, in: directory))
            try await withHookProxy(rules: store) { proxy in
                let accepted = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(accepted.status == 200)
                #expect(accepted.bodyText == "head-test body\n")
                #expect(origin.requests.count == 1)
                let firstEvents = await Hooks.records(proxy, count: 1).flatMap(\.events).filter { $0.hook == .trust }
                #expect(firstEvents.map(\.action) == ["trust accepted"])

                // Same host, same port: only the policy changes.
                let second = Trust(pinning: "public_key", pins: [S], store: [R])
                try directory.write(try second.ruleFile(port: origin.port, in: directory), to: "rules/rules.yaml")
                let reloaded = store.reload()
                guard case .success = reloaded else {
                    Issue.record("reload failed: \(reloaded)")
                    return
                }

                let rejected = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(rejected.status == 502)
                #expect(rejected.bodyText.hasPrefix("hookproxy: trust rejected localhost"), "\(rejected.bodyText)")
                let records = await Hooks.records(proxy, count: 2)
                let secondEvents = records.dropFirst().flatMap(\.events).filter { $0.hook == .trust }
                #expect(secondEvents.map(\.action) == ["trust rejected"])
                #expect(secondEvents.first?.detail.contains("step 4") == true, "\(secondEvents)")
                // The rejected flow sent nothing: still the one request of the first flow.
                #expect(origin.requests.count == 1)
                #expect(origin.tlsHandshakes == 1, "a new handshake was judged (and refused) for the new policy")
            }
        }
    }

    // MARK: machinery

    /// A row's `trust` rule. nil fields are left out of the YAML (the defaults apply).
    struct Trust {
        var pinning: String? = nil
        var pins: [TestCertificate]? = nil
        var certificates: [TestCertificate]? = nil
        var store: [TestCertificate]? = nil
        var ai: Bool? = nil
        var vd: Bool? = nil
        var certificatesAsDirectory = false
        /// `verify_time`, as written in the rule.
        var verifyTime: String? = nil

        /// The rule file: t.test mapped to https://localhost:PORT with this trust (certificate files in `directory`).
        func ruleFile(port: Int, in directory: TemporaryDirectory) throws -> String {
            var lines = ["    trust:", "      pinning: \(pinning ?? "none")"]
            if let pins { lines.append("      pins: \(yamlList(pins.map(\.spkiPin)))") }
            if let certificates {
                if certificatesAsDirectory {
                    let folder = directory.path + "/pinned-certs"
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                    for certificate in certificates {
                        try directory.writePEM([certificate], to: "pinned-certs/\(certificate.name).pem")
                    }
                    lines.append("      certificates: \(yamlList([folder]))")
                } else {
                    let files = try certificates.map { try directory.writePEM([$0], to: "pinned/\($0.name).pem") }
                    lines.append("      certificates: \(yamlList(files))")
                }
            }
            if let store {
                let file = try directory.writePEM(store, to: "store-\(store.map(\.name).joined()).pem")
                lines.append("      ca_file: \"\(file)\"")
            }
            if let ai { lines.append("      allow_invalid_certificates: \(ai)") }
            if let vd { lines.append("      validate_domain_name: \(vd)") }
            if let verifyTime { lines.append("      verify_time: \"\(verifyTime)\"") }
            return """
                rules:
                  - name: trust-case
                    match: { host: t.test }
                    map_remote: { to: "https://localhost:\(port)" }

                """ + lines.joined(separator: "\n") + "\n"
        }
    }

    /// Accept: the origin's bytes reach the client and the log says `trust accepted` with `detail` in its reason.
    func accept(server: [TestCertificate], _ trust: Trust, detail: [String],
                sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withOrigin(tls: Self.ca.identity(server)) { origin in
            let directory = try TemporaryDirectory()
            let store = try Hooks.store(directory, try trust.ruleFile(port: origin.port, in: directory))
            try await withHookProxy(rules: store) { proxy in
                let response = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(response.status == 200, "\(response.bodyText)", sourceLocation: sourceLocation)
                #expect(response.bodyText == "head-test body\n", sourceLocation: sourceLocation)
                #expect(response.header("X-Head-Test") == "yes", sourceLocation: sourceLocation)
                #expect(origin.requests.count == 1, sourceLocation: sourceLocation)
                let records = await Hooks.records(proxy)
                let events = records.flatMap(\.events).filter { $0.hook == .trust }
                #expect(events.map(\.action) == ["trust accepted"], "\(events)", sourceLocation: sourceLocation)
                for part in detail {
                    #expect(events.first?.detail.contains(part) == true, "'\(part)' not in \(events)",
                            sourceLocation: sourceLocation)
                }
                #expect(records.first?.error == nil, sourceLocation: sourceLocation)
                Self.expectPresentedChain(events.first, server, sourceLocation: sourceLocation)
            }
        }
    }

    /// The trust event carries the chain the server presented, leaf first (the viewer shows it, with the pins).
    static func expectPresentedChain(_ event: HookEvent?, _ server: [TestCertificate], sourceLocation: SourceLocation) {
        #expect(event?.chain?.map(\.pin) == server.map(\.spkiPin), "\(String(describing: event))", sourceLocation: sourceLocation)
        #expect(event?.chain?.allSatisfy { !$0.subject.isEmpty && !$0.issuer.isEmpty && !$0.notAfter.isEmpty } == true,
                sourceLocation: sourceLocation)
    }

    /// Reject: 502 `hookproxy: trust rejected localhost: …`, a `trust rejected` event naming the step, and the origin
    /// received no request bytes.
    func reject(server: [TestCertificate], _ trust: Trust, reason: [String],
                sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withOrigin(tls: Self.ca.identity(server)) { origin in
            let directory = try TemporaryDirectory()
            let store = try Hooks.store(directory, try trust.ruleFile(port: origin.port, in: directory))
            try await withHookProxy(rules: store) { proxy in
                let response = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(response.status == 502, "\(response.bodyText)", sourceLocation: sourceLocation)
                #expect(response.bodyText.hasPrefix("hookproxy: trust rejected localhost"), "\(response.bodyText)",
                        sourceLocation: sourceLocation)
                let records = await Hooks.records(proxy)
                let events = records.flatMap(\.events).filter { $0.hook == .trust }
                #expect(events.map(\.action) == ["trust rejected"], "\(events)", sourceLocation: sourceLocation)
                for part in reason {
                    #expect(events.first?.detail.contains(part) == true, "'\(part)' not in \(events)",
                            sourceLocation: sourceLocation)
                    #expect(response.bodyText.contains(part), "'\(part)' not in the 502 body \(response.bodyText)",
                            sourceLocation: sourceLocation)
                }
                #expect(records.first?.error?.hasPrefix("hookproxy: trust rejected") == true,
                        sourceLocation: sourceLocation)
                #expect(origin.requests.isEmpty, sourceLocation: sourceLocation)
                #expect(!origin.receivedAnyRequestBytes, sourceLocation: sourceLocation)
                if !server.isEmpty { Self.expectPresentedChain(events.first, server, sourceLocation: sourceLocation) }
            }
        }
    }

    /// Load error: RuleStore refuses the file with `file:line:col:` and a message naming the rule and the problem;
    /// `hookproxy check` exits 1 with the same message when the binary is built.
    func loadError(_ trust: Trust, message: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let directory = try TemporaryDirectory()
        let file = try trust.ruleFile(port: 1, in: directory)
        let failure = try Hooks.loadFailure(directory, file)
        guard let failure else {
            Issue.record("the rule loaded; expected a load error", sourceLocation: sourceLocation)
            return
        }
        #expect(failure.hasPrefix(directory.path + "/rules/rules.yaml:"), "\(failure)", sourceLocation: sourceLocation)
        #expect(failure.contains("rule 'trust-case'"), "\(failure)", sourceLocation: sourceLocation)
        for part in message {
            #expect(failure.contains(part), "'\(part)' not in \(failure)", sourceLocation: sourceLocation)
        }
        if let hookproxy = Hooks.executable {
            let check = try await Hooks.run(hookproxy, ["check", "--rules", directory.path + "/rules"])
            #expect(check.exitCode == 1, sourceLocation: sourceLocation)
            for part in message {
                #expect(check.stderr.contains(part), "'\(part)' not in \(check.stderr)", sourceLocation: sourceLocation)
            }
        }
    }
}
