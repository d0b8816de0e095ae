import Crypto
import FoundationEssentials
import X509

/// Pins (`sha256//BASE64`) and certificates (PEM/DER) for `trust`, decoded once at load.
enum Pins {
    struct Failure: Error {
        var reason: String
    }

    static let certificateExtensions: Set<String> = ["pem", "crt", "cer", "der"]

    static func extensionOf(_ name: String) -> String {
        guard let dot = name.lastIndex(of: ".") else { return "" }
        return name[name.index(after: dot)...].lowercased()
    }

    /// The 32 bytes of a `sha256//BASE64` pin, or nil.
    static func decode(_ pin: String) -> [UInt8]? {
        guard pin.hasPrefix("sha256//"), let data = Data(base64Encoded: String(pin.dropFirst(8))), data.count == 32
        else { return nil }
        return [UInt8](data)
    }

    static func encode(_ digest: [UInt8]) -> String { "sha256//" + Data(digest).base64EncodedString() }

    /// DER of each certificate in a PEM file (one or more `CERTIFICATE` blocks) or of a single DER certificate.
    static func certificates(in bytes: [UInt8]) -> Result<[[UInt8]], Failure> {
        var ders: [[UInt8]] = []
        if let text = String(validating: bytes, as: UTF8.self), text.contains("-----BEGIN") {
            var rest = Substring(text)
            while let begin = rest.firstRange(of: "-----BEGIN CERTIFICATE-----") {
                guard let end = rest[begin.upperBound...].firstRange(of: "-----END CERTIFICATE-----") else {
                    return .failure(Failure(reason: "a PEM certificate block has no END line"))
                }
                let base64 = rest[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
                guard let data = Data(base64Encoded: String(base64)) else {
                    return .failure(Failure(reason: "a PEM certificate block is not valid base64"))
                }
                ders.append([UInt8](data))
                rest = rest[end.upperBound...]
            }
            if ders.isEmpty {
                return .failure(Failure(reason: "holds no CERTIFICATE block (private keys are never pinned)"))
            }
        } else {
            ders = [bytes]
        }
        for der in ders {
            do { _ = try Certificate(derEncoded: der) } catch {
                return .failure(Failure(reason: "is not a readable X.509 certificate"))
            }
            guard spki(ofCertificate: der) != nil else {
                return .failure(Failure(reason: "is not a readable X.509 certificate"))
            }
        }
        return .success(ders)
    }

    /// SHA-256 of the certificate's SubjectPublicKeyInfo DER: what curl's `sha256//` pins and AF's public-key
    /// pinning compare.
    static func spkiSHA256(ofCertificate der: [UInt8]) -> [UInt8]? {
        guard let spki = spki(ofCertificate: der) else { return nil }
        return Array(SHA256.hash(data: spki))
    }

    /// The SubjectPublicKeyInfo TLV inside a certificate's DER: Certificate → TBSCertificate → [version], serial,
    /// signature, issuer, validity, subject, **subjectPublicKeyInfo**.
    static func spki(ofCertificate der: [UInt8]) -> ArraySlice<UInt8>? {
        guard let certificate = DER.element(der[...], at: der.startIndex), certificate.tag == 0x30,
              let tbs = DER.element(der[...], at: certificate.contentStart), tbs.tag == 0x30 else { return nil }
        var index = tbs.contentStart
        guard var element = DER.element(der[...], at: index) else { return nil }
        if element.tag == 0xA0 {  // [0] version
            index = element.end
        }
        for _ in 0..<5 {  // serial, signature, issuer, validity, subject
            guard let skipped = DER.element(der[...], at: index) else { return nil }
            index = skipped.end
        }
        guard let found = DER.element(der[...], at: index), found.tag == 0x30, found.end <= tbs.end else { return nil }
        element = found
        return der[index..<element.end]
    }
}

/// Just enough DER to walk to a certificate's public key.
enum DER {
    struct Element {
        var tag: UInt8
        var contentStart: Int
        var end: Int
    }

    static func element(_ bytes: ArraySlice<UInt8>, at index: Int) -> Element? {
        guard index + 1 < bytes.endIndex else { return nil }
        let tag = bytes[index]
        let first = bytes[index + 1]
        var length = 0
        var contentStart = index + 2
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 4, index + 2 + count <= bytes.endIndex else { return nil }
            for offset in 0..<count { length = length << 8 | Int(bytes[index + 2 + offset]) }
            contentStart += count
        }
        let end = contentStart + length
        guard end <= bytes.endIndex else { return nil }
        return Element(tag: tag, contentStart: contentStart, end: end)
    }
}
