import Foundation
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyUpstream

/// `allow_invalid_certificates` + `public_key`: the keys that count are those of the presented certificates that sign
/// one another from the leaf up. Hostile chains made with the openssl CLI at test time: a loop (A signed by B, B by
/// A) and decoys that name the leaf's issuer but hold another key. The walk ends, and decoys never join the path.
@Suite("trust: the signed path from the leaf (AI public_key)", .timeLimit(.minutes(2)))
struct TrustSignedPathTests {
    /// Runs `openssl` with `arguments` in `directory`; throws on a non-zero exit.
    static func openssl(_ arguments: [String], in directory: String) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown) }
    }

    static func key(_ name: String, in d: String) throws {
        try openssl(["genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(name).key"], in: d)
    }

    /// `name`.pem with subject CN=`cn`, signed by `issuer` (its .pem and .key), or self-signed when nil.
    static func cert(_ name: String, cn: String, issuer: String?, in d: String) throws {
        try openssl(["req", "-new", "-key", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(cn)"], in: d)
        if let issuer {
            try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(issuer).pem", "-CAkey", "\(issuer).key",
                         "-set_serial", String(Int.random(in: 1...1_000_000)), "-days", "20", "-out", "\(name).pem"], in: d)
        } else {
            try openssl(["x509", "-req", "-in", "\(name).csr", "-key", "\(name).key", "-days", "20", "-out", "\(name).pem"],
                        in: d)
        }
    }

    static func load(_ name: String, in d: String) throws -> X509Certificate {
        try #require(X509Certificate.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(d)/\(name).pem")))).first)
    }

    @Test func loopEndsAndDecoysNeverJoin() throws {
        let directory = try TemporaryDirectory()
        let d = directory.path
        for name in ["A", "B", "leaf", "decoy", "other"] { try Self.key(name, in: d) }
        // A0: CN=LoopA self-signed with A's key; B signed by A0; A signed by B: A and B sign each other.
        try Self.openssl(["req", "-x509", "-key", "A.key", "-subj", "/CN=LoopA", "-days", "20", "-out", "A0.pem"], in: d)
        try FileManager.default.copyItem(atPath: "\(d)/A.key", toPath: "\(d)/A0.key")
        try Self.cert("B", cn: "LoopB", issuer: "A0", in: d)
        try Self.cert("A", cn: "LoopA", issuer: "B", in: d)
        try Self.cert("leaf", cn: "localhost", issuer: "A", in: d)
        // A decoy named like A but with another key (self-signed): it names the leaf's issuer and signed nothing.
        try Self.cert("decoy", cn: "LoopA", issuer: nil, in: d)
        try Self.cert("other", cn: "Other", issuer: nil, in: d)
        let leaf = try Self.load("leaf", in: d), a = try Self.load("A", in: d), b = try Self.load("B", in: d)
        let decoy = try Self.load("decoy", in: d), other = try Self.load("other", in: d)

        let path = TrustEvaluator.signedPath([leaf, decoy, other, b, a, a, b, decoy])
        #expect(path.map(\.der) == [leaf, a, b].map(\.der), "\(path.map(\.subject))")

        // Pinning the decoy's or the unrelated certificate's key fails; pinning B (two links up the loop) passes.
        for (pinned, accepted) in [(decoy, false), (other, false), (b, true)] {
            var policy = TrustPolicy(rule: "t")
            policy.pinning = .publicKey
            policy.pinnedKeyHashes = [pinned.spkiSHA256]
            policy.allowInvalidCertificates = true
            let verdict = TrustEvaluator(policy: policy, host: "localhost").evaluate(presented: [leaf, decoy, other, b, a])
            if accepted { #expect(verdict == .accepted("step 4: \(b.pin) matched \(b.subject)"), "\(verdict)") }
            else { #expect(verdict.isRejected, "\(verdict)") }
        }
    }

    @Test func manyDistinctDecoysBeforeTheIssuer() throws {
        let directory = try TemporaryDirectory()
        let d = directory.path
        for name in ["I", "leaf"] { try Self.key(name, in: d) }
        try Self.cert("I", cn: "Issuer", issuer: nil, in: d)
        try Self.cert("leaf", cn: "localhost", issuer: "I", in: d)
        // 24 distinct certificates named like the issuer, with other keys, presented before it: each costs one
        // signature check (inside the 2n + 8 budget), and none joins the path.
        var decoys: [X509Certificate] = []
        for index in 0..<24 {
            try Self.key("decoy\(index)", in: d)
            try Self.cert("decoy\(index)", cn: "Issuer", issuer: nil, in: d)
            decoys.append(try Self.load("decoy\(index)", in: d))
        }
        let leaf = try Self.load("leaf", in: d), issuer = try Self.load("I", in: d)
        let path = TrustEvaluator.signedPath([leaf] + decoys + [issuer])
        #expect(path.map(\.der) == [leaf.der, issuer.der])
    }
}

extension TrustVerdict {
    var isRejected: Bool { if case .rejected = self { true } else { false } }
}
