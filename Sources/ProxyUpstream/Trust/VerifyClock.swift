internal import COpenSSL
import FoundationEssentials
import ProxyModel

/// The instant upstream certificate dates are checked at: a rule's `trust.verify_time`, else `--verify-time`,
/// else now. It reaches OpenSSL as `X509_VERIFY_PARAM_set_time` on the parameters of each verification's
/// `X509_STORE_CTX` (the ones TrustEvaluator builds, and the handshake's own for curl's default verification).
/// Curl thread (or the `pin` command's), like every verification.
struct VerifyClock: Sendable, Equatable {
    /// Where a fixed instant came from, spelled as the user wrote it.
    enum Source: String, Sendable {
        case rule = "verify_time"
        case flag = "--verify-time"
    }

    /// nil: now (OpenSSL's default).
    var instant: UTCInstant?
    var source: Source?

    static let now = VerifyClock(instant: nil, source: nil)

    private init(instant: UTCInstant?, source: Source?) {
        self.instant = instant
        self.source = source
    }

    /// The rule's instant wins over the global flag's.
    init(rule: UTCInstant?, flag: UTCInstant?) {
        if let rule { self.init(instant: rule, source: .rule) }
        else if let flag { self.init(instant: flag, source: .flag) }
        else { self.init(instant: nil, source: nil) }
    }

    /// `verify_time 2031-01-01T00:00:00Z` or `--verify-time 2031-01-01T00:00:00Z`; nil for now.
    var label: String? {
        guard let instant, let source else { return nil }
        return "\(source.rawValue) \(instant)"
    }

    /// Makes the verification that owns `param` (an `X509_VERIFY_PARAM`) check dates at the fixed instant.
    func apply(to param: OpaquePointer?) {
        guard let instant, let param else { return }
        X509_VERIFY_PARAM_set_time(param, time_t(instant.secondsSince1970))
    }

    /// When the verification in `context` failed on a certificate's dates: OpenSSL's reason, the certificate, the
    /// date that failed and the instant it was checked at, e.g. `certificate has expired: CN=localhost notAfter
    /// 2031-01-01T00:00:00Z, checked at 2031-02-01T00:00:00Z (--verify-time)`. nil for any other failure.
    func dateFailure(_ context: OpaquePointer) -> String? {
        let error = X509_STORE_CTX_get_error(context)
        let notBefore = error == X509_V_ERR_CERT_NOT_YET_VALID || error == X509_V_ERR_ERROR_IN_CERT_NOT_BEFORE_FIELD
        let notAfter = error == X509_V_ERR_CERT_HAS_EXPIRED || error == X509_V_ERR_ERROR_IN_CERT_NOT_AFTER_FIELD
        guard notBefore || notAfter, let current = X509_STORE_CTX_get_current_cert(context) else { return nil }
        let certificate = X509Certificate(retaining: current)
        let reason = String(cString: X509_verify_cert_error_string(Int(error)))
        let date = notBefore
            ? "notBefore \(certificate.notBeforeInstant?.description ?? certificate.notBefore)"
            : "notAfter \(certificate.notAfterInstant?.description ?? certificate.notAfter)"
        let checkedAt = instant.map { "\($0) (\(source?.rawValue ?? ""))" }
            ?? "\(UTCInstant(secondsSince1970: Int64(Date().timeIntervalSince1970))) (now)"
        return "\(reason): \(certificate.subject) \(date), checked at \(checkedAt)"
    }
}
