import ProxyModel
import Testing

/// `caseInsensitiveEquals`: ASCII letters compare without case, every other byte exactly (field names).
struct CaseInsensitiveEqualsTests {
    @Test("letters fold; brackets, @ and `, digits and non-ASCII bytes do not",
          arguments: [("Content-Type", "content-type", true), ("ETAG", "etag", true), ("[", "{", false), ("@", "`", false),
                      ("X-1", "x-1", true), ("X-1", "x-2", false), ("É", "é", false), ("é", "é", true), ("a", "ab", false),
                      ("", "", true), ("Host", "Hosu", false), ("^", "~", false)])
    func compares(_ a: String, _ b: String, _ equal: Bool) {
        #expect(a.caseInsensitiveEquals(b) == equal)
        #expect(b.caseInsensitiveEquals(a) == equal)
    }
}

/// The byte-buffer path against the definition, on every pair of bytes (both orders, at each position).
struct CaseInsensitiveEqualsExhaustiveTests {
    @Test func everyBytePairFoldsOnlyLetters() {
        for a in UInt8(0x20)...UInt8(0x7E) {
            for b in UInt8(0x20)...UInt8(0x7E) {
                let lower = { (x: UInt8) in (x >= 65 && x <= 90) ? x + 32 : x }
                let expected = lower(a) == lower(b)
                let left = String(decoding: [0x78, a, 0x79], as: UTF8.self)
                let right = String(decoding: [0x78, b, 0x79], as: UTF8.self)
                #expect(left.caseInsensitiveEquals(right) == expected)
                // A Substring-backed (bridged or shared) text takes the same answer.
                #expect(String(left.dropFirst(0)).caseInsensitiveEquals(right) == expected)
            }
        }
    }
}

/// `HTTPToken` against RFC 9110's list, byte by byte.
struct HTTPTokenTests {
    @Test func tokenBytesAreExactlyTheRFCs() {
        let rfc = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPToken.isTokenByte(byte) == rfc.contains(byte), "byte \(byte)")
        }
        #expect(HTTPToken.isToken("X-Request-ID"))
        #expect(!HTTPToken.isToken(""))
        #expect(!HTTPToken.isToken("Bad Name"))
        #expect(!HTTPToken.isToken("Bad:Name"))
        #expect(!HTTPToken.isToken("Ünicode"))
    }
}

/// The hop-by-hop list, looked up by length: each standard name goes in any case, a name of the same length stays.
struct HopByHopTests {
    @Test func standardNamesGoAndLookalikesStay() {
        let standard = ["Connection", "KEEP-ALIVE", "proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate",
                        "tE", "Transfer-Encoding", "upgrade"]
        let lookalikes = ["Connectiom", "keep-alivf", "proxy-connectiom", "proxy-authorizatiom", "proxy-authenticatf",
                          "tf", "transfer-encodinh", "upgradf", "Trailer", "Host"]
        // (`Trailer` names a field no `Connection` names: its value "1" is one, and would leave it.)
        var headers = HeaderFields((standard + lookalikes).map { HeaderField(name: $0, value: $0 == "Trailer" ? "X-Sum" : "1") })
        HopByHop.strip(&headers)
        #expect(headers.map(\.name) == lookalikes)
    }

    /// List items are split at comma and semicolon bytes. A review found that the Character-based split it replaced
    /// read `,` or `;` followed by a combining mark as no separator: a header named in `Connection` was then forwarded.
    @Test func listsSplitAtBytes() {
        var named = HeaderFields([HeaderField(name: "Connection", value: "x-a,\u{301}"), HeaderField(name: "X-A", value: "1"),
                                  HeaderField(name: "X-B", value: "2")])
        HopByHop.strip(&named)
        #expect(named.map(\.name) == ["X-B"])
        var trailersWithParameter = HeaderFields([HeaderField(name: "TE", value: "trailers;\u{301}")])
        HopByHop.strip(&trailersWithParameter)
        #expect(trailersWithParameter.map { "\($0.name): \($0.value)" } == ["TE: trailers"])
        var noCoding = HeaderFields([HeaderField(name: "TE", value: ";trailers")])  // a parameter without a coding
        HopByHop.strip(&noCoding)
        #expect(noCoding.isEmpty)
    }

    /// `TE: trailers` is kept in a request only: a response's `TE` went to the client (a review's find), and an
    /// HTTP/2 response may not carry it at all (RFC 9113 §8.2.2).
    @Test func teGoesFromResponses() {
        var response = HeaderFields([HeaderField(name: "TE", value: "trailers"), HeaderField(name: "X-A", value: "1")])
        HopByHop.strip(&response, in: .response)
        #expect(response.map(\.name) == ["X-A"])
        var request = HeaderFields([HeaderField(name: "TE", value: "trailers"), HeaderField(name: "X-A", value: "1")])
        HopByHop.strip(&request, in: .request)
        #expect(request.map { "\($0.name): \($0.value)" } == ["X-A: 1", "TE: trailers"])
    }

    /// A trailer the head's `Connection` names is dropped, so `Trailer` stops announcing it (it kept doing so: the
    /// client waited for a field that never came); a `Trailer` with nothing left goes, one that names no dropped
    /// field is left as it was.
    @Test func trailerStopsAnnouncingDroppedFields() {
        var head = HeaderFields([HeaderField(name: "trailer", value: "X-Sum, x-hop ,TE"), HeaderField(name: "Connection", value: "X-Hop"),
                                 HeaderField(name: "X-A", value: "1"), HeaderField(name: "Trailer", value: "X-Hop")])
        HopByHop.strip(&head, in: .response)
        #expect(head.map { "\($0.name): \($0.value)" } == ["trailer: X-Sum", "X-A: 1"])
        var onlyDropped = HeaderFields([HeaderField(name: "Trailer", value: "x-hop"), HeaderField(name: "Connection", value: "x-hop")])
        HopByHop.strip(&onlyDropped, in: .response)
        #expect(onlyDropped.isEmpty)
        var untouched = HeaderFields([HeaderField(name: "Trailer", value: "X-Sum ,  X-Other"), HeaderField(name: "Connection", value: "close")])
        HopByHop.strip(&untouched, in: .request)
        #expect(untouched.map { "\($0.name): \($0.value)" } == ["Trailer: X-Sum ,  X-Other"])
    }
}
