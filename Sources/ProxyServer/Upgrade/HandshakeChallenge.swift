import Crypto
import FoundationEssentials
import Glibc
import ProxyModel
import ProxyRules

/// `on_challenge` for an upgrade handshake. curl only connects for an upgrade (the handshake is hookproxy's own), so
/// it never sees the server's 401: the answer curl would give any other request is made here, Basic or Digest
/// (RFC 7617, RFC 7616 with MD5 or SHA-256, qop `auth`), once. `cancel` is `HookDecisions`' as for any exchange.
/// Pure apart from the Digest client nonce.
enum HandshakeChallenge {
    enum Decision: Equatable {
        /// Send the handshake again (on a new connection) with this `Authorization` value.
        case answer(authorization: String, scheme: String)
        /// Hand the 401 to the client, with an event when a credential was tried and refused.
        case pass(HookEvent?)
    }

    /// What to do with a 401 to the handshake `request` under `policy` (`use_credential`); `answered`: this is
    /// already the answer's round.
    static func decide(_ head: ResponseHead, policy: ChallengePolicy?, request: RequestHead, answered: Bool,
                       clientNonce: String = makeClientNonce()) -> Decision {
        guard head.status == 401, let policy, policy.action == .useCredential, let username = policy.username else {
            return .pass(nil)
        }
        let offered = challenges(head.headers.values(for: "www-authenticate"))
        let allows = { (scheme: AuthScheme) in policy.schemes.contains(.any) || policy.schemes.contains(scheme) }
        if answered {
            let scheme = offered.first.map { $0.scheme } ?? "any"
            return .pass(HookEvent(hook: .challenge, action: "challenge failed", detail: "the server refused the \(scheme) credential"))
        }
        let password = policy.password ?? ""
        if allows(.digest) {
            // The first Digest challenge it can answer (a server may offer SHA-512-256 first, then SHA-256).
            for digest in offered where digest.scheme == "digest" {
                if let value = digestAnswer(digest.parameters, username: username, password: password, request: request,
                                            clientNonce: clientNonce) {
                    return .answer(authorization: value, scheme: "digest")
                }
            }
        }
        if allows(.basic), offered.contains(where: { $0.scheme == "basic" }) {
            return .answer(authorization: "Basic " + Data("\(username):\(password)".utf8).base64EncodedString(), scheme: "basic")
        }
        return .pass(nil)
    }

    /// The challenges of `WWW-Authenticate` values: scheme (lower-cased) and its parameters (names lower-cased).
    /// A value may hold several (`Basic realm="a", Digest realm="b", nonce="n"`).
    static func challenges(_ values: [String]) -> [(scheme: String, parameters: [String: String])] {
        var found: [(scheme: String, parameters: [String: String])] = []
        for value in values {
            for part in splitChallenges(value) {
                let words = part.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
                guard let scheme = words.first else { continue }
                found.append((scheme.lowercased(), words.count > 1 ? AuthParameters.parse(words[1]) : [:]))
            }
        }
        return found
    }

    /// Splits a header value where a new challenge starts: a token followed by a space, not `name=`.
    private static func splitChallenges(_ value: String) -> [Substring] {
        var parts: [Substring] = []
        var start = value.startIndex
        var inQuotes = false
        var index = value.startIndex
        while index < value.endIndex {
            let character = value[index]
            if character == "\"" { inQuotes.toggle() }
            if character == ",", !inQuotes {
                let rest = value[value.index(after: index)...].drop { $0 == " " }
                let token = rest.prefix { $0 != " " && $0 != "=" && $0 != "," }
                let after = rest.dropFirst(token.count)
                // A scheme is a token then a space, and what follows is not `=` (`realm = "x"` is a parameter).
                if !token.isEmpty, after.first == " ", after.drop(while: { $0 == " " }).first != "=" {
                    parts.append(value[start..<index])
                    start = rest.startIndex
                }
            }
            index = value.index(after: index)
        }
        parts.append(value[start...])
        return parts.map { $0.drop { $0 == " " } }.filter { !$0.isEmpty }
    }

    /// The `Authorization: Digest …` value (RFC 7616 §3.4), or nil for an algorithm or qop it does not speak
    /// (`-sess` variants, `auth-int` only).
    static func digestAnswer(_ challenge: [String: String], username: String, password: String, request: RequestHead,
                             clientNonce: String) -> String? {
        guard let realm = challenge["realm"], let nonce = challenge["nonce"] else { return nil }
        let algorithm = challenge["algorithm"] ?? "MD5"
        let hash: (String) -> String
        switch algorithm.uppercased() {
        case "MD5": hash = { hex(Insecure.MD5.hash(data: Array($0.utf8))) }
        case "SHA-256": hash = { hex(SHA256.hash(data: Array($0.utf8))) }
        default: return nil
        }
        let qops = (challenge["qop"] ?? "").split(separator: ",").map { $0.trimmingWhitespace().lowercased() }
        if !qops.isEmpty && !qops.contains("auth") { return nil }
        let uri = request.url.pathAndQuery
        let ha1 = hash("\(username):\(realm):\(password)")
        let ha2 = hash("\(request.method):\(uri)")
        let count = "00000001"
        let response = qops.isEmpty ? hash("\(ha1):\(nonce):\(ha2)") : hash("\(ha1):\(nonce):\(count):\(clientNonce):auth:\(ha2)")
        var fields = ["username=\(quoted(username))", "realm=\(quoted(realm))", "nonce=\(quoted(nonce))",
                      "uri=\(quoted(uri))", "algorithm=\(algorithm)", "response=\"\(response)\""]
        if !qops.isEmpty { fields += ["qop=auth", "nc=\(count)", "cnonce=\(quoted(clientNonce))"] }
        if let opaque = challenge["opaque"] { fields.append("opaque=\(quoted(opaque))") }
        return "Digest " + fields.joined(separator: ", ")
    }

    static func makeClientNonce() -> String {
        hex(SystemRandomNumberGenerator.bytes(16))
    }

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }

    private static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        bytes.map { byte in byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }.joined()
    }
}

extension SystemRandomNumberGenerator {
    /// `count` random bytes.
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
