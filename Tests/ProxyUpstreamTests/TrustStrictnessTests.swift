import Foundation
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyUpstream

/// Issue 11, item 14: host names are matched as curl matches them (no partial wildcards), and certificates are
/// verified for the TLS server purpose. Through a real TLS TestOrigin and ChainInspector (what `hookproxy pin`
/// and every `trust` decision use), plus the matcher on its own.
@Suite("trust strictness: host names and purpose (issue 11)", .timeLimit(.minutes(2)))
struct TrustHostNameTests {
    static let ca = TestCA.shared

    @Test func partialWildcardNamesNothing() throws {
        let partial = try #require(X509Certificate.parse(Self.ca.partialWildcard.der).first)
        #expect(!partial.matches(host: "foo.hookproxy.test"))
        #expect(!partial.matches(host: "f.hookproxy.test"))
        let leaf = try #require(X509Certificate.parse(Self.ca.leaf.der).first)
        #expect(leaf.matches(host: "localhost"))
        #expect(leaf.matches(host: "127.0.0.1"))
        #expect(!leaf.matches(host: "other.invalid"))
    }

    @Test func partialWildcardServerIsRejected() async throws {
        let ca = Self.ca
        let directory = try TemporaryDirectory()
        let caFile = try directory.writePEM([ca.root], to: "ca.pem")
        let origin = try await TestOrigin.start(tls: ca.identity([ca.partialWildcard, ca.intermediate]))
        let inspected = Result { () throws(ProxyError) -> ChainReport in
            try ChainInspector.inspect(host: "127.0.0.1", port: origin.port, serverName: "foo.hookproxy.test",
                                       caFile: caFile)
        }
        try await origin.shutdown()
        let report = try inspected.get()
        #expect(report.presented.first?.der == ca.partialWildcard.der)
        #expect(report.verificationFailure?.contains("host name: certificate is not valid for foo.hookproxy.test") == true,
                "\(String(describing: report.verificationFailure))")
        let policy = TrustPolicy(rule: "t", caFile: caFile)
        #expect(TrustEvaluator(policy: policy, host: "foo.hookproxy.test").evaluate(presented: report.presented)
                == .rejected("step 1: host name: certificate is not valid for foo.hookproxy.test"))
    }

    @Test func clientAuthOnlyLeafFailsTheServerPurpose() throws {
        let ca = Self.ca
        let directory = try TemporaryDirectory()
        let caFile = try directory.writePEM([ca.root], to: "ca.pem")
        let chain = [ca.clientAuthLeaf, ca.intermediate].flatMap { X509Certificate.parse($0.der) }
        let verdict = TrustEvaluator(policy: TrustPolicy(rule: "t", caFile: caFile), host: "localhost").evaluate(presented: chain)
        #expect(verdict == .rejected("step 1: chain: unsuitable certificate purpose"))
        let good = [ca.leaf, ca.intermediate].flatMap { X509Certificate.parse($0.der) }
        #expect(TrustEvaluator(policy: TrustPolicy(rule: "t", caFile: caFile), host: "localhost").evaluate(presented: good)
                == .accepted("step 1: chain valid"))
    }
}
