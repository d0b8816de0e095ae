import Foundation
import ProxyModel
import Testing
@testable import ProxyRules

@Suite struct BodyTransformTests {
    func responseTransform(_ yaml: String, files: [String: String] = [:]) throws -> any BodyTransforming {
        let set = try ruleSet(yaml, files: files)
        return try #require(set.plan(for: request("GET", "http://x.test/")).responseBodyTransform)
    }

    func apply(_ transform: any BodyTransforming, _ body: String, headers: HeaderFields = [("Content-Length", "1")])
        -> (String, HeaderFields, [String]) {
        var headers = headers
        let (out, notes) = transform.apply(to: Array(body.utf8), headers: &headers)
        return (String(decoding: out, as: UTF8.self), headers, notes)
    }

    @Test func replaceWithGroupsAndText() throws {
        let transform = try responseTransform("""
        rules:
          - name: r
            response:
              body:
                replace:
                  - { regex: "user-(\\\\d+)", with: "id:$1" }
                  - { text: "$1", with: "dollar-one" }
        """)
        let (body, headers, notes) = apply(transform, "user-12 and user-7 cost $1")
        #expect(body == "id:12 and id:7 cost dollar-one")
        #expect(headers["Content-Length"] == String(body.utf8.count))
        #expect(notes.isEmpty)
    }

    @Test func jsonSetAndRemove() throws {
        let transform = try responseTransform("""
        rules:
          - name: j
            response:
              body:
                json:
                  set:
                    "a.b[0].c": 5
                    "new.deep.key": "text"
                    flag: true
                    obj: { x: [1, "2", null] }
                  remove: [secret, "a.b[1]"]
        """)
        let (body, _, notes) = apply(transform, #"{"secret":"s","a":{"b":[{"c":1,"d":2},{"c":3}]},"n":1.50}"#)
        #expect(body == #"{"a":{"b":[{"c":5,"d":2}]},"n":1.50,"new":{"deep":{"key":"text"}},"flag":true,"obj":{"x":[1,"2",null]}}"#)
        #expect(notes.isEmpty)
    }

    @Test func jsonImpossiblePathAndNonJSONLeaveBodyUnchanged() throws {
        let transform = try responseTransform("""
        rules:
          - name: j
            response: { body: { json: { set: { "a[5]": 1, "b": 2 } } } }
        """)
        let original = #"{"a":[1,2]}"#
        let (body, _, notes) = apply(transform, original)
        #expect(body == original)
        #expect(notes == ["json.set a[5]: index 5 is past the end of an array of 2; body unchanged (j)"])
        let (text, _, textNotes) = apply(transform, "<html>")
        #expect(text == "<html>")
        #expect(textNotes.first?.hasPrefix("json (j): body is not JSON") == true)
        let (str, _, strNotes) = apply(transform, #"{"a":"x"}"#)
        #expect(str == #"{"a":"x"}"#)
        #expect(strNotes == ["json.set a[5]: cannot index [5] into a string; body unchanged (j)"])
    }

    @Test func gzipRoundTrip() throws {
        let transform = try responseTransform("""
        rules:
          - name: g
            response: { body: { replace: [{ text: hello, with: goodbye }] } }
        """)
        let compressed = ContentCoding.gzip(Array("hello gzip".utf8))
        var headers: HeaderFields = [("Content-Encoding", "gzip"), ("Content-Length", String(compressed.count))]
        let (out, notes) = transform.apply(to: compressed, headers: &headers)
        #expect(String(decoding: out, as: UTF8.self) == "goodbye gzip")
        #expect(!headers.contains("Content-Encoding"))
        #expect(headers["Content-Length"] == "12")
        #expect(notes.isEmpty)
        // Chunked bodies lose Content-Length instead.
        var chunked: HeaderFields = [("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")]
        _ = transform.apply(to: compressed, headers: &chunked)
        #expect(!chunked.contains("Content-Length"))
        // Unsupported coding: unchanged with a note.
        var br: HeaderFields = [("Content-Encoding", "br")]
        let (same, brNotes) = transform.apply(to: [1, 2, 3], headers: &br)
        #expect(same == [1, 2, 3])
        #expect(br["Content-Encoding"] == "br")
        #expect(brNotes == ["body left unchanged: Content-Encoding 'br' is not supported for transforms"])
    }

    @Test("a gzip or zlib body cut short, or with more after its stream, is left as it came, not served as a prefix")
    func incompleteCompressedBodyIsLeftUnchanged() throws {
        let transform = try responseTransform("""
        rules:
          - name: g
            response: { body: { replace: [{ text: hello, with: goodbye }] } }
        """)
        let text = Array(String(repeating: "hello world, ", count: 400).utf8) + Array(32...126).map(UInt8.init)
        let gzip = ContentCoding.gzip(text)
        let cases: [(String, String, [UInt8])] = [
            ("gzip cut short", "gzip", Array(gzip.prefix(gzip.count - 30))),
            ("gzip cut before its trailer", "gzip", Array(gzip.dropLast(8))),
            ("gzip with bytes after the stream", "gzip", gzip + Array("trailing".utf8)),
            ("two gzip members", "gzip", gzip + ContentCoding.gzip(Array("second".utf8))),
            ("zlib cut before its check", "deflate", Array(zlib(text).dropLast(4))),
        ]
        for (name, coding, body) in cases {
            var headers: HeaderFields = [("Content-Encoding", coding), ("Content-Length", String(body.count))]
            let (out, notes) = transform.apply(to: body, headers: &headers)
            #expect(out == body, "\(name): the body changed")
            #expect(headers["Content-Encoding"] == coding, "\(name)")
            #expect(headers["Content-Length"] == String(body.count), "\(name)")
            #expect(notes.first?.hasPrefix("body left unchanged") == true, "\(name): \(notes)")
        }
        // Whole streams still decode (and an empty body needs no decoding).
        for (coding, body) in [("gzip", gzip), ("deflate", zlib(text))] {
            var headers: HeaderFields = [("Content-Encoding", coding)]
            let (out, notes) = transform.apply(to: body, headers: &headers)
            #expect(out.starts(with: Array("goodbye world".utf8)), "\(coding)")
            #expect(notes.isEmpty, "\(coding): \(notes)")
        }
        var empty: HeaderFields = [("Content-Encoding", "gzip"), ("Content-Length", "0")]
        #expect(transform.apply(to: [], headers: &empty).notes.isEmpty)
    }

    /// A zlib stream (RFC 1950) of `bytes`: gzip's deflate data between zlib's header and an Adler-32 trailer.
    private func zlib(_ bytes: [UInt8]) -> [UInt8] {
        let gzip = ContentCoding.gzip(bytes)
        var flagsEnd = 10  // a plain gzip header: no extra, name or comment fields from CompressNIO
        if gzip[3] & 0x08 != 0 { flagsEnd = gzip[10...].firstIndex(of: 0)! + 1 }
        let deflate = gzip[flagsEnd..<(gzip.count - 8)]
        let check = ContentCoding.adler32(bytes)
        return [0x78, 0x9C] + deflate + [UInt8(check >> 24), UInt8(check >> 16 & 0xFF), UInt8(check >> 8 & 0xFF), UInt8(check & 0xFF)]
    }

    @Test func fileReplacesBodyThenOtherRulesApply() throws {
        let transform = try responseTransform("""
        rules:
          - name: f
            response: { body: { file: body.txt } }
          - name: r
            response: { body: { replace: [{ regex: "^F", with: "f" }] } }
        """, files: ["body.txt": "From file"])
        let (body, _, notes) = apply(transform, "original")
        #expect(body == "from file")
        #expect(notes == ["body replaced from body.txt"])
    }

    @Test func catastrophicRegexIsBounded() throws {
        let transform = try responseTransform("""
        rules:
          - name: evil
            response: { body: { replace: [{ regex: "(a+)+$", with: "x" }] } }
        """)
        let input = String(repeating: "a", count: 40) + "!"
        // Bounded: the match's budget ran out (the note says so) and the body is unchanged.
        let result = apply(transform, input)
        #expect(result.0 == input)
        #expect(result.2 == ["replace (evil): regex /(a+)+$/ needed more than 2000000 backtracking steps (or 16 MiB) for one match; body unchanged"])
    }

    /// Many cheap matches: each is within its step budget, and the time budget is checked between them.
    @Test func timeBudgetBetweenMatches() throws {
        let regex = try CompiledRegex.compile("a").get()
        let replacement = Replacement(pattern: .regex(regex, ReplacementTemplate("b", groupCount: 0)), with: "b")
        var notes: [String] = []
        let body = Array(repeating: UInt8(ascii: "a"), count: 1000)
        let out = BodyTransformChain.replace(body, [replacement], rule: "many", deadline: .now - .seconds(1), notes: &notes)
        #expect(out == body)
        #expect(notes == ["replace (many): regex /a/ ran out of its time budget; body unchanged"])
    }

    /// A short body an upstream fills with what an ordinary rule matches: 1 MiB of `x`, each `x` replaced by 100
    /// bytes, was a 100 MiB body (16 MiB would have been gigabytes, bounded only by the time budget). The result
    /// may grow to the decoded-body bound, no further. (Each `x` becomes 4 KiB here, so the bound is passed after
    /// 16,384 matches, well inside the regex's time budget on a loaded machine; at 100 bytes, 670,000 matches in a
    /// debug build took 0.6 s alone and over the 2 s budget in a loaded full run.)
    @Test func replacementThatWouldGrowPastTheBoundLeavesTheBody() throws {
        let with = String(repeating: "y", count: 4096)
        let transform = try responseTransform("""
        rules:
          - name: grow
            response: { body: { replace: [{ regex: "x", with: "\(with)" }] } }
        """)
        let input = String(repeating: "x", count: 1 << 20)
        let result = apply(transform, input)
        #expect(result.0.utf8.count == input.utf8.count)
        #expect(result.2 == ["replace (grow): regex /x/ would make the body larger than 67108864 bytes; body unchanged"])
        // Within the bound it grows as asked.
        let small = apply(transform, "axb")
        #expect(small.0 == "a" + with + "b")
    }

    /// The same with a literal `text`: it had no bound at all, not even the regexes' time budget (16 MiB of `x`,
    /// each made 100 bytes, was a 1.6 GB body).
    @Test func literalReplacementThatWouldGrowPastTheBoundLeavesTheBody() throws {
        let with = String(repeating: "y", count: 100)
        let transform = try responseTransform("""
        rules:
          - name: grow
            response: { body: { replace: [{ text: "x", with: "\(with)" }] } }
        """)
        let input = String(repeating: "x", count: 1 << 20)
        let result = apply(transform, input)
        #expect(result.0.utf8.count == input.utf8.count)
        #expect(result.2 == ["replace (grow): text 'x' would make the body larger than 67108864 bytes; body unchanged"])
        #expect(apply(transform, "axb").0 == "a" + with + "b")
    }

    @Test func requestBodyTransform() throws {
        let set = try ruleSet("""
        rules:
          - name: login
            match: { method: POST }
            request: { body: { json: { set: { password: "***" } } } }
        """)
        let transform = try #require(set.plan(for: request("POST", "http://x.test/login")).requestBodyTransform)
        var headers: HeaderFields = [("Content-Length", "20")]
        let (out, _) = transform.apply(to: Array(#"{"user":"a","password":"p"}"#.utf8), headers: &headers)
        #expect(String(decoding: out, as: UTF8.self) == #"{"user":"a","password":"***"}"#)
        #expect(headers["Content-Length"] == String(out.count))
    }

    @Test func jsonParserRoundTripsAndRefusesDeepNesting() throws {
        let text = #"{"a":[1,-2.5e3,true,false,null,"\u00e9\"\n"],"b":{}}"#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value.serialized() == #"{"a":[1,-2.5e3,true,false,null,"é\"\n"],"b":{}}"#)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array((String(repeating: "[", count: 10_000)).utf8)) }
    }
}
