import ProxyModel
import Testing
@testable import ProxyServer

/// `HandshakeChallenge`: the answer hookproxy makes itself to a 401 to an upgrade handshake (curl never sees it).
struct HandshakeChallengeTests {
    static let request = RequestHead(method: "GET", url: ProxyURL(string: "http://h.test/chat?room=1")!)

    static func decide(_ challenges: [String], schemes: [AuthScheme] = [.any], answered: Bool = false) -> HandshakeChallenge.Decision {
        let head = ResponseHead(status: 401, headers: HeaderFields(challenges.map { HeaderField(name: "WWW-Authenticate", value: $0) }))
        let policy = ChallengePolicy(rule: "r", action: .useCredential, schemes: schemes, username: "Mufasa", password: "Circle of Life")
        return HandshakeChallenge.decide(head, policy: policy, request: request, answered: answered, clientNonce: "0a4f113b")
    }

    @Test("several challenges in one value or several: Digest preferred, Basic when the rule allows only it")
    func picksAScheme() {
        let both = [#"Basic realm="a", Digest realm="b, c", nonce="n", qop="auth,auth-int""#]
        #expect(HandshakeChallenge.challenges(both).map(\.scheme) == ["basic", "digest"])
        #expect(HandshakeChallenge.challenges(both).last?.parameters["realm"] == "b, c")
        guard case .answer(let digest, "digest") = Self.decide(both) else { Issue.record("no digest answer"); return }
        #expect(digest.hasPrefix(#"Digest username="Mufasa", realm="b, c", nonce="n", uri="/chat?room=1", algorithm=MD5, response=""#))
        #expect(digest.hasSuffix(#"qop=auth, nc=00000001, cnonce="0a4f113b""#))
        #expect(Self.decide(both, schemes: [.basic]) == .answer(authorization: "Basic TXVmYXNhOkNpcmNsZSBvZiBMaWZl", scheme: "basic"))
        #expect(Self.decide(["NTLM", #"Negotiate"#]) == .pass(nil), "none it speaks: the 401 goes to the client")
        #expect(Self.decide([#"Digest realm="x", nonce="n", algorithm=MD5-sess"#, #"Basic realm="x""#])
                == .answer(authorization: "Basic TXVmYXNhOkNpcmNsZSBvZiBMaWZl", scheme: "basic"))
    }

    @Test("spaces around '=' are parameters, not new challenges; the first Digest challenge it can answer is used")
    func looserChallenges() {
        guard case .answer(let spaced, "digest") = Self.decide([#"Digest realm = "x", nonce = "n1", qop = "auth""#]) else {
            Issue.record("no answer to a challenge with spaces around '='")
            return
        }
        #expect(spaced.contains(#"realm="x""#) && spaced.contains(#"nonce="n1""#), "\(spaced)")
        let two = [#"Digest realm="a", nonce="n", algorithm=SHA-512-256"#, #"Digest realm="a", nonce="n", algorithm=MD5"#]
        guard case .answer(let chosen, "digest") = Self.decide(two) else {
            Issue.record("the MD5 challenge after a SHA-512-256 one was not answered")
            return
        }
        #expect(chosen.contains("algorithm=MD5"), "\(chosen)")
    }

    @Test("RFC 7616's MD5 example (qop auth) gives its response hash; SHA-256 is spoken too")
    func digestHashes() {
        let rfc = HandshakeChallenge.digestAnswer(
            ["realm": "http-auth@example.org", "nonce": "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", "qop": "auth",
             "algorithm": "MD5", "opaque": "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"],
            username: "Mufasa", password: "Circle of Life",
            request: RequestHead(method: "GET", url: ProxyURL(string: "http://www.example.org/dir/index.html")!),
            clientNonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ")
        #expect(rfc?.contains(#"response="8ca523f5e9506fed4657c9700eebdbec""#) == true, "\(rfc ?? "nil")")
        #expect(rfc?.contains(#"opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#) == true)
        let sha = HandshakeChallenge.digestAnswer(
            ["realm": "http-auth@example.org", "nonce": "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", "qop": "auth",
             "algorithm": "SHA-256"],
            username: "Mufasa", password: "Circle of Life",
            request: RequestHead(method: "GET", url: ProxyURL(string: "http://www.example.org/dir/index.html")!),
            clientNonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ")
        #expect(sha?.contains(#"response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1""#) == true, "\(sha ?? "nil")")
    }

    @Test("the answer's round refused again: the 401 goes to the client, logged as a failed challenge")
    func refusedOnce() {
        #expect(Self.decide([#"Basic realm="x""#], answered: true)
                == .pass(HookEvent(hook: .challenge, action: "challenge failed", detail: "the server refused the basic credential")))
    }
}
