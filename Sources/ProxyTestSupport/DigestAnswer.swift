import Foundation
import Crypto
import ProxyModel

/// A client's `Authorization: Digest …` answer (RFC 7616, MD5, qop=auth), parsed and checkable. Any thread.
struct DigestAnswer {
    var parameters: [String: String]
    var nonce: String { parameters["nonce"] ?? "" }

    init?(_ header: String) {
        guard header.lowercased().hasPrefix("digest ") else { return nil }
        parameters = AuthParameters.parse(header.dropFirst(7))
    }

    /// Recomputes the response hash from the password the route was given and compares.
    func verify(user: String, realm: String, password: String, method: String, target: String) -> Bool {
        guard parameters["username"] == user, parameters["realm"] == realm, parameters["uri"] == target,
            parameters["qop"] == "auth", let nc = parameters["nc"], let cnonce = parameters["cnonce"],
            let response = parameters["response"]
        else { return false }
        if let algorithm = parameters["algorithm"], algorithm.uppercased() != "MD5" { return false }
        let ha1 = DigestAnswer.md5("\(user):\(realm):\(password)")
        let ha2 = DigestAnswer.md5("\(method):\(target)")
        return DigestAnswer.md5("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)") == response.lowercased()
    }

    static func md5(_ text: String) -> String {
        Insecure.MD5.hash(data: Array(text.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
