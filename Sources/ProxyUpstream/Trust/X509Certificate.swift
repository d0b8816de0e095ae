internal import COpenSSL
import FoundationEssentials
import ProxyModel

/// One certificate held through OpenSSL (reference counted), with the facts hookproxy prints and pins by.
/// Immutable; safe to read from any thread.
public final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes a new reference to `pointer`.
    init(retaining pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    /// Every certificate in PEM or DER bytes (a PEM bundle may hold several).
    public static func parse(_ bytes: [UInt8]) -> [X509Certificate] {
        var result: [X509Certificate] = []
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
            defer { BIO_free(bio) }
            while let cert = PEM_read_bio_X509(bio, nil, nil, nil) {
                result.append(X509Certificate(owning: cert))
            }
            ERR_clear_error()
            if result.isEmpty {
                var cursor = raw.baseAddress?.assumingMemoryBound(to: UInt8.self)
                if let cert = d2i_X509(nil, &cursor, raw.count) { result.append(X509Certificate(owning: cert)) }
                ERR_clear_error()
            }
        }
        return result
    }

    private init(owning pointer: OpaquePointer) { self.pointer = pointer }

    /// The DER encoding.
    public var der: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(pointer, &out)
        guard length > 0, let out else { return [] }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// SHA-256 of the SubjectPublicKeyInfo DER: what `sha256//` pins name.
    public var spkiSHA256: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(pointer), &out)
        guard length > 0, let out else { return [] }
        defer { CRYPTO_free(out, #fileID, #line) }
        return sha256(UnsafeRawBufferPointer(start: out, count: Int(length)))
    }

    /// `sha256//BASE64` of the public key, as curl and `trust.pins` write it.
    public var pin: String { "sha256//" + Data(spkiSHA256).base64EncodedString() }

    /// SHA-256 of the DER, as colon-separated upper-case hex.
    public var fingerprint: String {
        HexText.colonSeparated(der.withUnsafeBytes { sha256($0) })
    }

    public var subject: String { X509Certificate.describe(X509_get_subject_name(pointer)) }
    public var issuer: String { X509Certificate.describe(X509_get_issuer_name(pointer)) }
    public var notBefore: String { X509Certificate.describe(X509_get0_notBefore(pointer)) }
    public var notAfter: String { X509Certificate.describe(X509_get0_notAfter(pointer)) }
    /// The validity dates as instants (nil when OpenSSL cannot read the field).
    public var notBeforeInstant: UTCInstant? { X509Certificate.instant(X509_get0_notBefore(pointer)) }
    public var notAfterInstant: UTCInstant? { X509Certificate.instant(X509_get0_notAfter(pointer)) }

    /// Whether the certificate names `host` (an IP address is matched against IP SANs). A wildcard must be the
    /// whole left-most label (`*.example.com`), as curl requires: `f*.example.com` names nothing.
    public func matches(host: String) -> Bool {
        if host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) {
            return X509_check_ip_asc(pointer, host, 0) == 1
        }
        return X509_check_host(pointer, host, host.utf8.count, hp_x509_check_flag_no_partial_wildcards(), nil) == 1
    }

    private static func describe(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        X509_NAME_print_ex(bio, name, 0, hp_xn_flag_rfc2253())
        return bioString(bio)
    }

    private static func describe(_ time: UnsafePointer<ASN1_TIME>?) -> String {
        guard let time, let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        ASN1_TIME_print(bio, time)
        return bioString(bio)
    }

    private static func instant(_ time: UnsafePointer<ASN1_TIME>?) -> UTCInstant? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return UTCInstant(secondsSince1970: Int64(timegm(&parts)))
    }

    private static func bioString(_ bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = hp_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}

func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    _ = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha256(), nil)
    return digest
}
