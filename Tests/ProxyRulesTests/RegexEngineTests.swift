import Foundation
import Testing
@testable import ProxyRules

/// Rules' regexes ran on NSRegularExpression (ICU) until PCRE2 took over. These tests hold PCRE2 to ICU's answers,
/// matches and replacement templates alike, over patterns rule files use and over the corners where engines differ:
/// empty matches, line terminators, Unicode classes and case, lookaround, groups that take no part.
@Suite struct RegexEngineTests {
    static let patterns = [
        #"a*"#, #"(?=a)|a"#, #"\b"#, #"(\w+)@(\w+)\.com"#, #"^/v1/(\w+)$"#, #"(?i)héllo"#, #"\d+"#, #"a$"#, #"."#,
        #"[^a]"#, #"(a)|(b)"#, #"x*"#, #"é+"#, #"(?<=a)b"#, #"\s+"#, #"colou?r"#, #"(a+)(b)?"#, #"$"#, #"^"#,
        #"[a-z]+?"#, #"\p{L}+"#, #"(?m)^\w"#, #"\."#, #"[é-ü]+"#, #"(?s)a.+"#, #"a{2,3}"#, #"(\d{3})-(\d{4})"#,
        #"user-(\d+)"#, #"(?i)STRASSE|straße"#, #"\W+"#, #"[[:alpha:]]+"#, #"(?:ab)+"#, #"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)"#,
        #"\bcat\b"#, #"(?x) a  b # comment"#, #"\u00e9"#, #"\U0001F44D"#, #"\Q\u00e9\E"#, #"\\u00e9"#, #"\x{1F44D}"#, #"a\Z"#, #"a\z"#, #"[\r\n]+"#, #".$"#,
    ]
    static let subjects = [
        "", "baaac", "aa", "ab cd", "é", "user-12 and user-7 cost $1", "a\r\nb\nc\r", "a\rb", "Ünïcödé straße STRASSE",
        "👍🏽 emoji a👍", "a\u{2028}b\u{2029}", "x@y.com z@w.com", "/v1/users", "/v1/", "colour color", "abcdefghijk!",
        "héllo HÉLLO", "٣٤ 12", "a\n", "cat concat cat", "e\u{301}é", "aab\tb  c", "a.b.c", "ab", "a b\n", #"\u00e9 é"#,
    ]
    static let templates = ["X", "[$0]", "<$1>", "$2$1", "\\$1", "$$", "a\\", "$12", "é\\n", "$11-$1", "", "${1}", "$x"]

    static func reference(_ pattern: String) -> NSRegularExpression? { try? NSRegularExpression(pattern: pattern) }

    /// The one difference kept: ICU counts combining marks (U+0300…) as word characters, PCRE2 10.42 does not, so
    /// `\w`, `\W` and `\b` differ on decomposed text ("e\u{301}"). README says so.
    static func differsByDesign(_ pattern: String, _ subject: String) -> Bool {
        subject.unicodeScalars.contains { $0.properties.generalCategory == .nonspacingMark }
            && (pattern.contains(#"\w"#) || pattern.contains(#"\W"#) || pattern.contains(#"\b"#))
    }

    @Test func firstMatchGroupsAsICU() throws {
        var compared = 0
        for pattern in Self.patterns {
            guard let ns = Self.reference(pattern) else { continue }
            let ours = try CompiledRegex.compile(pattern).get()
            #expect(ours.groupCount == ns.numberOfCaptureGroups, "\(pattern)")
            for subject in Self.subjects where !Self.differsByDesign(pattern, subject) {
                let text = subject as NSString
                let expected = ns.firstMatch(in: subject, range: NSRange(location: 0, length: text.length)).map { match in
                    (0..<match.numberOfRanges).map { index in
                        match.range(at: index).location == NSNotFound ? "" : text.substring(with: match.range(at: index))
                    }
                }
                #expect(ours.firstMatch(in: subject) == (expected.map { .matched($0) } ?? .notMatched), "/\(pattern)/ on \(subject.debugDescription)")
                compared += 1
            }
        }
        #expect(compared > 900)
        #expect(try CompiledRegex.compile(#"\w"#).get().firstMatch(in: "\u{301}") == .notMatched)  // the kept difference
    }

    @Test func replaceAllAsICU() throws {
        let far = ContinuousClock.now + .seconds(60)
        for pattern in Self.patterns {
            guard let ns = Self.reference(pattern) else { continue }
            let ours = try CompiledRegex.compile(pattern).get()
            // Templates naming a group the pattern lacks never reach a match: the loader refuses them.
            for template in Self.templates where (Replacement.maxGroupReference(in: template) ?? 0) <= ours.groupCount {
                let parsed = ReplacementTemplate(template, groupCount: ours.groupCount)
                for subject in Self.subjects where !Self.differsByDesign(pattern, subject) {
                    let expected = ns.stringByReplacingMatches(in: subject, range: NSRange(location: 0,
                                                               length: (subject as NSString).length), withTemplate: template)
                    #expect((try? ours.replacing(in: subject, with: parsed, deadline: far, maxBytes: .max).get()) == expected,
                            "/\(pattern)/ → \(template.debugDescription) on \(subject.debugDescription)")
                }
            }
        }
    }

    @Test func compileErrorsSayWhatAndWhere() {
        guard case .failure(let error) = CompiledRegex.compile("^/v1/(") else { Issue.record("compiled"); return }
        #expect(error.reason == "missing closing parenthesis (at offset 6)")
        guard case .failure(let star) = CompiledRegex.compile("*a") else { Issue.record("compiled"); return }
        #expect(star.reason == "quantifier does not follow a repeatable item (at offset 0)")
        // Offsets count in the pattern as written, also after an ICU escape PCRE2 reads rewritten.
        guard case .failure(let late) = CompiledRegex.compile(#"\u00e9("#) else { Issue.record("compiled"); return }
        #expect(late.reason == "missing closing parenthesis (at offset 7)")
    }

    /// A pattern that backtracks exponentially stops at its budget within a bounded time, whichever thread runs it
    /// (`path_regex` matches on the event loop).
    @Test func catastrophicPathRegexIsBounded() throws {
        let evil = try CompiledRegex.compile("^(a|aa)+$").get()
        let subject = String(repeating: "a", count: 60) + "!"
        let start = ContinuousClock.now
        #expect(evil.firstMatch(in: subject) == .overBudget)
        #expect(ContinuousClock.now - start < .seconds(2))
    }
    /// `\C` (one code unit, in UTF-8 mode a third of `é`) would split characters: a replacement then wrote U+FFFD
    /// and the next search started inside a character, which PCRE2 does not allow. ICU has no `\C`: refused at load.
    @Test func singleCodeUnitEscapeIsRefused() {
        guard case .failure(let error) = CompiledRegex.compile(#"a\C"#) else { Issue.record("\\C compiled"); return }
        #expect(error.reason.contains("\\C"), "\(error.reason)")
        #expect(error.reason.hasSuffix("(at offset 3)"), "\(error.reason)")
    }

    /// Repeated groups over long text need more than the 32 KiB machine stack PCRE2's JIT code starts with: a
    /// `(?:.|\n)*?` over a page, `(a|b)*c` over 100 KB. ICU matches them in milliseconds; so must we, not report a
    /// spent budget after a few microseconds.
    @Test func repeatedGroupsOverLongTextMatchAsICU() throws {
        let cases: [(String, String)] = [
            (#"(?:a|b)*c"#, String(repeating: "ab", count: 50_000) + "c"),
            (#"(a|b)*c"#, String(repeating: "ab", count: 50_000) + "c"),
            (#"<p>((?:.|\n)*?)</p>"#, "<p>" + String(repeating: "hello world\n", count: 20_000) + "</p>"),
        ]
        for (pattern, subject) in cases {
            let regex = try CompiledRegex.compile(pattern).get()
            let template = ReplacementTemplate("X", groupCount: regex.groupCount)
            #expect((try? regex.replacing(in: subject, with: template, deadline: .now + .seconds(60), maxBytes: .max).get()) == "X", "/\(pattern)/")
            #expect(regex.firstMatch(in: subject).groups?.first?.utf8.count == subject.utf8.count, "/\(pattern)/")
        }
    }
}

extension CompiledRegex.FirstMatch {
    /// The groups of a match; nil otherwise.
    var groups: [String]? {
        if case .matched(let groups) = self { return groups }
        return nil
    }

    var isMatch: Bool { groups != nil }
}
