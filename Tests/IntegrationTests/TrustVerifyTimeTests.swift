import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

/// Issue 18, item 4: a fixed verify clock. `trust.verify_time` and `--verify-time` (here the in-process
/// configuration's `upstream.verifyTime`) check certificate dates at that instant. Real sockets as in
/// TrustCasesTests: a TLS TestOrigin presenting a leaf minted with chosen dates (under I, store R), a rule
/// `t.test` → `https://localhost:PORT` with the `trust`, and curl through hookproxy.
@Suite("trust verify_time (issue 18)", .timeLimit(.minutes(2)))
struct TrustVerifyTimeTests {
    typealias Trust = TrustCasesTests.Trust
    static let ca = TestCA.shared
    let now = Date()
    var R: TestCertificate { Self.ca.root }
    var I: TestCertificate { Self.ca.intermediate }

    /// RFC 3339 in UTC, written by Foundation (not by the code under test).
    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    func days(_ count: Double) -> String { Self.rfc3339(now + count * 86_400) }
    var nowText: String { Self.rfc3339(now) }

    @Test("a leaf expiring next month: rejected at a verify_time two months ahead (naming its notAfter), accepted now")
    func ruleVerifyTimeAfterNotAfter() async throws {
        let leaf = try Self.ca.leaf(notAfter: now + 30 * 86_400)
        let notAfter = Self.rfc3339(leaf.certificate.notValidAfter)
        let later = days(60)

        let rejected = try await exchange([leaf, I], Trust(store: [R], verifyTime: later))
        rejected.expectRejected(["step 1: chain: certificate has expired", "CN=localhost notAfter \(notAfter)",
                                 "checked at \(later) (verify_time)"])
        rejected.expectEvent(["verify_time \(later)]"])

        let atNow = try await exchange([leaf, I], Trust(store: [R]))
        atNow.expectAccepted()
        atNow.expectEvent(["step 1: chain valid"], absent: ["verify_time", "--verify-time"])

        let earlier = try await exchange([leaf, I], Trust(store: [R], verifyTime: nowText))
        earlier.expectAccepted()
        earlier.expectEvent(["step 1: chain valid", "[rule trust-case, verify_time \(nowText)]"])
    }

    @Test("a leaf not valid before tomorrow: rejected now (naming its notBefore), accepted at a verify_time after it")
    func ruleVerifyTimeAfterNotBefore() async throws {
        let leaf = try Self.ca.leaf(name: "L-future", notBefore: now + 86_400, notAfter: now + 30 * 86_400)
        let notBefore = Self.rfc3339(leaf.certificate.notValidBefore)

        let atNow = try await exchange([leaf, I], Trust(store: [R]))
        atNow.expectRejected(["certificate is not yet valid", "notBefore \(notBefore)", "(now)"])

        let later = try await exchange([leaf, I], Trust(store: [R], verifyTime: days(2)))
        later.expectAccepted()
        later.expectEvent(["verify_time \(days(2))"])
    }

    @Test("--verify-time checks dates for a trust rule without verify_time, and the event names it")
    func globalVerifyTime() async throws {
        let leaf = try Self.ca.leaf(notAfter: now + 30 * 86_400)
        let notAfter = Self.rfc3339(leaf.certificate.notValidAfter)
        let later = days(60)

        let rejected = try await exchange([leaf, I], Trust(store: [R]), flag: later)
        rejected.expectRejected(["certificate has expired", "notAfter \(notAfter)", "checked at \(later) (--verify-time)"])
        rejected.expectEvent(["[rule trust-case, --verify-time \(later)]"])

        let atNow = try await exchange([leaf, I], Trust(store: [R]), flag: nowText)
        atNow.expectAccepted()
        atNow.expectEvent(["step 1: chain valid", "--verify-time \(nowText)"])
    }

    @Test("a rule's verify_time wins over --verify-time, both ways")
    func ruleWinsOverFlag() async throws {
        let leaf = try Self.ca.leaf(notAfter: now + 30 * 86_400)
        let later = days(60)

        let accepted = try await exchange([leaf, I], Trust(store: [R], verifyTime: nowText), flag: later)
        accepted.expectAccepted()
        accepted.expectEvent(["verify_time \(nowText)"], absent: ["--verify-time", later])

        let rejected = try await exchange([leaf, I], Trust(store: [R], verifyTime: later), flag: nowText)
        rejected.expectRejected(["certificate has expired", "checked at \(later) (verify_time)"])
        rejected.expectEvent(["verify_time \(later)"], absent: ["--verify-time"])
    }

    @Test("pin checks use the clock: certificate pinning (step 3, even with AI), public-key pinning (step 2); public_key with AI checks no dates")
    func pinningUsesTheClock() async throws {
        let leaf = try Self.ca.leaf(notAfter: now + 30 * 86_400)
        let notAfter = Self.rfc3339(leaf.certificate.notValidAfter)
        let later = days(60)

        let certificateLater = try await exchange([leaf, I], Trust(pinning: "certificate", certificates: [leaf], ai: true,
                                                                   verifyTime: later))
        certificateLater.expectRejected(["step 3", "certificate has expired", "notAfter \(notAfter)"])
        let certificateNow = try await exchange([leaf, I], Trust(pinning: "certificate", certificates: [leaf], ai: true,
                                                                 verifyTime: nowText))
        certificateNow.expectAccepted()
        certificateNow.expectEvent(["step 3: pinned certificate"])

        let keyLater = try await exchange([leaf, I], Trust(pinning: "public_key", pins: [leaf], store: [R]), flag: later)
        keyLater.expectRejected(["step 2", "certificate has expired", "notAfter \(notAfter)"])
        let keyNow = try await exchange([leaf, I], Trust(pinning: "public_key", pins: [leaf], store: [R]), flag: nowText)
        keyNow.expectAccepted()

        let keyAllowInvalid = try await exchange([leaf, I], Trust(pinning: "public_key", pins: [leaf], ai: true),
                                                 flag: later)
        keyAllowInvalid.expectAccepted()
        keyAllowInvalid.expectEvent(["step 4", leaf.spkiPin, "--verify-time \(later)"])
    }

    // MARK: machinery

    /// What one request through hookproxy produced.
    struct Outcome {
        var response: CurlResponse
        var trustEvents: [HookEvent]
        var originRequests: Int
        var originSawBytes: Bool
        var sourceLocation: SourceLocation

        /// 502 `hookproxy: trust rejected localhost: …` with every part in the body and the event; no request bytes.
        func expectRejected(_ parts: [String]) {
            #expect(response.status == 502, "\(response.bodyText)", sourceLocation: sourceLocation)
            #expect(response.bodyText.hasPrefix("hookproxy: trust rejected localhost: "), "\(response.bodyText)",
                    sourceLocation: sourceLocation)
            #expect(trustEvents.map(\.action) == ["trust rejected"], "\(trustEvents)", sourceLocation: sourceLocation)
            for part in parts {
                #expect(response.bodyText.contains(part), "'\(part)' not in \(response.bodyText)",
                        sourceLocation: sourceLocation)
            }
            expectEvent(parts)
            #expect(originRequests == 0 && !originSawBytes, sourceLocation: sourceLocation)
        }

        func expectAccepted() {
            #expect(response.status == 200, "\(response.bodyText)", sourceLocation: sourceLocation)
            #expect(response.bodyText == "head-test body\n", sourceLocation: sourceLocation)
            #expect(trustEvents.map(\.action) == ["trust accepted"], "\(trustEvents)", sourceLocation: sourceLocation)
        }

        /// The trust event's detail holds every part of `present` and none of `absent`.
        func expectEvent(_ present: [String], absent: [String] = []) {
            let detail = trustEvents.first?.detail ?? ""
            for part in present {
                #expect(detail.contains(part), "'\(part)' not in \(detail)", sourceLocation: sourceLocation)
            }
            for part in absent {
                #expect(!detail.contains(part), "'\(part)' in \(detail)", sourceLocation: sourceLocation)
            }
        }
    }

    /// `curl -x hookproxy http://t.test/head-test` with `trust` in the rule and `flag` as `--verify-time`.
    func exchange(_ server: [TestCertificate], _ trust: Trust, flag: String? = nil,
                  sourceLocation: SourceLocation = #_sourceLocation) async throws -> Outcome {
        let instant = try flag.map(UTCInstant.init(parsing:))
        return try await withOrigin(tls: Self.ca.identity(server)) { origin in
            let directory = try TemporaryDirectory()
            let store = try Hooks.store(directory, try trust.ruleFile(port: origin.port, in: directory))
            return try await withHookProxy(rules: store, { $0.upstream.verifyTime = instant }) { proxy in
                let response = try await Hooks.curl(proxy, "http://t.test/head-test")
                let events = await Hooks.records(proxy).flatMap(\.events).filter { $0.hook == .trust }
                return Outcome(response: response, trustEvents: events, originRequests: origin.requests.count,
                               originSawBytes: origin.receivedAnyRequestBytes, sourceLocation: sourceLocation)
            }
        }
    }
}
