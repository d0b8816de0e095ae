import Foundation
import ProxyLog
import ProxyModel
import ProxyTestSupport
import Testing

/// A certificate whose subject and DNS name hold a NUL byte (`localhost\0.evil.test`): the `trust` hook's host check
/// must not match `localhost` by reading the name only up to the NUL (the classic CVE-2009-2408 trick), and the
/// name, when logged, must not break the log's JSON. Beside the table's rows, in TrustCasesTests.
extension TrustCasesTests {
    static let nulName = "localhost\u{0}.evil.test"

    @Test("a name with a NUL byte does not pass the host check for the name before the NUL")
    func nulInNameIsNoMatch() async throws {
        let X = try Self.ca.leaf(name: "NUL", commonName: Self.nulName, dnsNames: [Self.nulName])
        // Valid chain under R, so only the name can fail.
        try await reject(server: [X, I], Trust(store: [R]), reason: ["step 1", "host name"])
        // Pinned as a certificate with allow_invalid_certificates: step 3 still checks the name.
        try await reject(server: [X, I], Trust(pinning: "certificate", certificates: [X], ai: true),
                         reason: ["step 3", "host name"])
    }

    @Test("a name with a NUL byte in the trust event: the JSONL line and the HAR entry stay valid JSON without a raw NUL")
    func nulInNameLogged() async throws {
        let X = try Self.ca.leaf(name: "NUL", commonName: Self.nulName, dnsNames: [Self.nulName])
        try await withOrigin(tls: Self.ca.identity([X, I])) { origin in
            let directory = try TemporaryDirectory()
            let trust = Trust(store: [R], vd: false)  // accepted: the chain is valid, the name is not checked
            let store = try Hooks.store(directory, try trust.ruleFile(port: origin.port, in: directory))
            try await withHookProxy(rules: store) { proxy in
                let response = try await Hooks.curl(proxy, "http://t.test/head-test")
                #expect(response.status == 200, "\(response.bodyText)")
                let record = try #require(await Hooks.records(proxy).last)
                let event = try #require(record.events.first { $0.hook == .trust })
                let subject = try #require(event.chain?.first?.subject)
                #expect(subject.contains("localhost\\00.evil.test"), "the NUL is in the name, escaped: \(subject)")
                for json in [JSONLWriter.line(for: record), HARWriter.entryJSON(for: record)] {
                    #expect(!json.utf8.contains(0), "a raw NUL in the log")
                    let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8))
                    #expect(parsed is [String: Any])
                    #expect(json.contains("evil.test"), "the subject is logged")
                }
            }
        }
    }
}
