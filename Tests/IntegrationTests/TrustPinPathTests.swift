import Foundation
import ProxyTestSupport
import Testing

/// `public_key` pins count only on the chain as built: the verified path from the leaf (plus the anchor that completed
/// it), or with `allow_invalid_certificates` the presented certificates that sign one another from the leaf up. A
/// pinned CA's certificate is public: a server that sends it next to a leaf it did not issue must not pass the pin.
/// Beside the table's rows, in TrustCasesTests (its certificates and helpers, through real sockets).
extension TrustCasesTests {
    @Test("a valid chain under another root, with the pinned intermediate appended off-path, is rejected")
    func appendedPinnedIntermediateWithValidChain() async throws {
        // UL is valid (U is in the store) and I is a presented extra that signed nothing in UL's path.
        try await reject(server: [UL, I], .init(pinning: "public_key", pins: [I], store: [R, U]),
                         reason: ["step 4", "no pinned public key"])
    }

    @Test("allow_invalid_certificates: a self-signed leaf with the pinned intermediate appended is rejected")
    func appendedPinnedIntermediateWithAllowInvalid() async throws {
        try await reject(server: [S, I], .init(pinning: "public_key", pins: [I], ai: true, vd: false),
                         reason: ["step 4", "no pinned public key"])
    }

    @Test("allow_invalid_certificates: the intermediate that did sign the leaf still matches its pin")
    func signingIntermediateWithAllowInvalid() async throws {
        try await accept(server: [L, I], .init(pinning: "public_key", pins: [I], ai: true),
                         detail: ["step 4", I.spkiPin])
    }

    @Test("what `hookproxy pin` skips does not pass: an unrelated certificate sent after a valid chain, pinned")
    func extraPresentedCertificatePinned() async throws {
        // PinCommandTests.extraCertificateSkipped: `pin` prints no pin for S here; a rule pinning it is rejected.
        try await reject(server: [L, I, S], .init(pinning: "public_key", pins: [S], store: [R]),
                         reason: ["step 4", "no pinned public key"])
        try await reject(server: [L, I, S], .init(pinning: "public_key", pins: [S], ai: true, vd: false),
                         reason: ["step 4", "no pinned public key"])
    }
}
