import Crypto
import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

@Suite struct HookTests {
    @Test func redirectPolicy() throws {
        let set = try ruleSet("""
        rules:
          - name: follow
            match: { host: a.test }
            on_redirect: { action: follow, max_hops: 3, same_host_only: true }
          - name: rewrite
            match: { host: b.test }
            on_redirect: { action: rewrite, rewrite: { from: "https://prod.test", to: "http://localhost:9000" } }
        """)
        #expect(set.plan(for: request("GET", "http://a.test/")).onRedirect ==
                RedirectPolicy(rule: "follow", action: .follow, maxHops: 3, sameHostOnly: true))
        #expect(set.plan(for: request("GET", "http://b.test/")).onRedirect ==
                RedirectPolicy(rule: "rewrite", action: .rewrite, rewrite: .init(from: "https://prod.test", to: "http://localhost:9000")))
        #expect(errorsOf("rules:\n  - name: a\n    on_redirect: {action: rewrite}\n") ==
                ["r.yaml:3:27: 'on_redirect.action: rewrite' needs 'rewrite: {from, to}'"])
        #expect(errorsOf("rules:\n  - name: a\n    on_redirect: {action: folow}\n") ==
                ["r.yaml:3:27: 'on_redirect.action' must be one of pass, follow, block, rewrite, found 'folow' — did you mean 'follow'?"])
    }

    @Test func challengePolicy() throws {
        let set = try ruleSet("""
        rules:
          - name: c
            on_challenge:
              action: use_credential
              schemes: [basic, digest]
              username: alice
              password_env: PW
        """, env: ["PW": "s3cret"])
        #expect(set.plan(for: request("GET", "http://a.test/")).onChallenge ==
                ChallengePolicy(rule: "c", action: .useCredential, schemes: [.basic, .digest], username: "alice", password: "s3cret"))
        let dir = TempRules()
        defer { dir.remove() }
        dir.write("r.yaml", "rules:\n  - name: c\n    on_challenge: {action: use_credential, username: a, password_env: NOPE_UNSET}\n")
        #expect(dir.warnings() == ["r.yaml:3:71: warning: environment variable 'NOPE_UNSET' (password_env) is not set; the credential has no password"])
        let certs = TempRules()
        defer { certs.remove() }
        certs.write("me.pem", "cert")
        certs.write("me.key", "key")
        certs.write("r.yaml", "rules:\n  - name: c\n    on_challenge: {client_certificate: {cert: me.pem, key: me.key}}\n")
        let policy = try #require(try certs.loaded().plan(for: request("GET", "http://a.test/")).onChallenge)
        #expect(policy.action == .pass)
        #expect(policy.schemes == [.any])
        #expect(policy.clientCertificate?.certificatePath.hasSuffix("/me.pem") == true)
    }

    @Test func trustPinsFromCertificates() throws {
        let pem = ExampleCertificate.pem
        let der = try #require(try Pins.certificates(in: Array(pem.utf8)).get().first)
        let expectedPin = try #require(Pins.decode("sha256//fX1b5SS8+c4JVgRYpluHLwq3Ws2J9D+cq7SaFupJX0M="))
        #expect(Pins.spkiSHA256(ofCertificate: der) == expectedPin)  // same as openssl pkey -pubin | sha256
        let set = try ruleSet("""
        rules:
          - name: pk
            match: { host: a.test }
            trust: { pinning: public_key, certificates: [certs], pins: ["sha256//fX1b5SS8+c4JVgRYpluHLwq3Ws2J9D+cq7SaFupJX0M="] }
          - name: cert
            match: { host: b.test }
            trust: { pinning: certificate, certificates: [certs/api.pem], ca_file: certs/api.pem, validate_domain_name: false }
        """, files: ["certs/api.pem": pem])
        let pk = try #require(set.plan(for: request("GET", "https://a.test/")).trust)
        #expect(pk.pinning == .publicKey)
        #expect(pk.pinnedKeyHashes == [expectedPin, expectedPin])
        let cert = try #require(set.plan(for: request("GET", "https://b.test/")).trust)
        #expect(cert.pinning == .certificate)
        #expect(cert.pinnedCertificates == [der])
        #expect(cert.pinnedKeyHashes.isEmpty)
        #expect(cert.caFile?.hasSuffix("certs/api.pem") == true)
        #expect(cert.validateDomainName == false)
        #expect(cert.allowInvalidCertificates == false)
    }

    @Test func aKeyIsNeverPinned() {
        let errors = errorsOf("rules:\n  - name: k\n    trust: {pinning: certificate, certificates: [k.pem]}\n",
                              files: ["k.pem": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"])
        #expect(errors == ["r.yaml:3:50: certificate file 'k.pem': holds no CERTIFICATE block (private keys are never pinned)"])
    }
}
