@testable import ProxyRules
import Testing

/// `YAMLComposer` gives the rule loader what Yams' `compose(yaml:)` gave it: the corners decided here are the
/// ones Yams decided (checked against Yams 6.2.2 when the composer replaced it).
@Suite struct YAMLComposerTests {
    private func compose(_ text: String) throws -> YAMLNode? { try YAMLComposer.compose(text) }

    private func failure(_ text: String) -> YAMLSyntaxError? {
        do throws(YAMLSyntaxError) {
            _ = try YAMLComposer.compose(text)
            return nil
        } catch {
            return error
        }
    }

    private func pairs(_ node: YAMLNode?) -> [(key: YAMLNode, value: YAMLNode)] {
        guard case .mapping(let mapping)? = node else { return [] }
        return Array(mapping)
    }

    private func scalar(_ node: YAMLNode?) -> YAMLNode.Scalar? {
        guard case .scalar(let scalar)? = node else { return nil }
        return scalar
    }

    @Test func emptyTextIsNoDocument() throws {
        #expect(try compose("") == nil)
        #expect(try compose("# only a comment\n\n") == nil)
        // `---` alone is a document holding one empty plain scalar (null), not nothing.
        let lone = try #require(scalar(try compose("---\n")))
        #expect(lone.string == "" && lone.style == .plain && lone.tag == .null)
    }

    @Test func aSecondDocumentIsAnErrorAtItsStart() {
        let error = failure("rules: []\n---\nrules: []\n")
        #expect(error?.mark == YAMLMark(line: 2, column: 1))
        #expect(error?.problem == "a second document starts here; a rule file is one YAML document")
        #expect(failure("--- a\n--- b\n")?.mark == YAMLMark(line: 2, column: 1))
        #expect(failure("rules: []\n...\nb: 1\n")?.mark == YAMLMark(line: 3, column: 1), "after `...` a bare document")
        #expect(failure("rules: []\n...\n") == nil, "an explicit end with nothing after it is one document")
    }

    @Test func scalarsKeepTheirStyleAndTag() throws {
        let root = pairs(try compose("a: 1\nb: '1'\nc: \"true\"\nd: yes\ne: ~\nf:\ng: !!str 1\nh: ! 1\ni: |\n  x\nj: !x 1\nk: <<\n"))
        let got = root.map { pair in scalar(pair.value).map { "\($0.string)|\($0.style)|\($0.tag)" } ?? "?" }
        #expect(got == ["1|plain|tag:yaml.org,2002:int", "1|singleQuoted|tag:yaml.org,2002:str",
                        "true|doubleQuoted|tag:yaml.org,2002:str", "yes|plain|tag:yaml.org,2002:bool",
                        "~|plain|tag:yaml.org,2002:null", "|plain|tag:yaml.org,2002:null",
                        "1|plain|tag:yaml.org,2002:str", "1|plain|tag:yaml.org,2002:str",
                        "x\n|literal|tag:yaml.org,2002:str", "1|plain|!x", "<<|plain|tag:yaml.org,2002:merge"])
    }

    @Test func marksAreOneBasedAndCountCharacters() throws {
        let root = pairs(try compose("a: 1\n\u{E9}\u{E9}: {b: [c]}\n"))
        #expect(root.map(\.key.mark) == [YAMLMark(line: 1, column: 1), YAMLMark(line: 2, column: 1)])
        #expect(root.map(\.value.mark) == [YAMLMark(line: 1, column: 4), YAMLMark(line: 2, column: 5)])
        let inner = pairs(root[1].value)
        #expect(inner.first?.value.mark == YAMLMark(line: 2, column: 9))
    }

    @Test func scalarsKeepNULFromAnEscape() throws {
        #expect(scalar(try compose("\"a\\0b\""))?.string == "a\u{0}b")
    }

    @Test func anAliasIsTheAnchoredNodeWithItsMark() throws {
        let root = pairs(try compose("x: &a {host: h}\ny: *a\n"))
        #expect(root[1].value.mark == YAMLMark(line: 1, column: 4), "the anchor's place, where the value is written")
        #expect(pairs(root[1].value).first?.value.string == "h")
    }

    @Test func aLaterAnchorReplacesAnEarlierOne() throws {
        let root = pairs(try compose("x: &a 1\ny: &a 2\nz: *a\n"))
        #expect(root[2].value.string == "2")
    }

    @Test func anAnchorCountsFromTheEndOfItsNode() {
        let error = failure("&a [*a]")
        #expect(error?.problem == "found undefined alias")
        #expect(error?.mark == YAMLMark(line: 1, column: 5))
        #expect(failure("rules: *x\n")?.mark == YAMLMark(line: 1, column: 8))
    }

    /// YAML 1.1 merge keys (PyYAML's and libyaml-based loaders' reading): explicit keys win, then the merged
    /// mappings in order; the merged values keep the marks of where they are written.
    @Test func mergeKeysAddTheKeysAMappingDoesNotWrite() throws {
        let root = pairs(try compose("base: &b {x: 1, y: 1}\nrule: {<<: *b, y: 2}\n"))
        let rule = pairs(root[1].value)
        #expect(rule.map { "\($0.key.string ?? ""):\($0.value.string ?? "")" } == ["y:2", "x:1"])
        #expect(rule[1].value.mark == YAMLMark(line: 1, column: 14), "x's value is where it is written")
        let list = pairs(pairs(try compose("a: &a {k: a, p: a}\nb: &b {k: b, q: b}\nc: {<<: [*a, *b]}\n"))[2].value)
        #expect(list.map { "\($0.key.string ?? ""):\($0.value.string ?? "")" } == ["k:a", "p:a", "q:b"], "the earlier mapping wins")
        // A quoted '<<' is an ordinary key; `!!merge` merges.
        #expect(pairs(pairs(try compose("m: {'<<': {a: 1}}\n"))[0].value).map { $0.key.string } == ["<<"])
        #expect(pairs(pairs(try compose("m: {!!merge '<<': {a: 1}}\n"))[0].value).map { $0.key.string } == ["a"])
        #expect(failure("{<<: {a: 1}, <<: {b: 1}}")?.duplicateKeys == ["<<"])
        #expect(failure("m: {<<: 5}\n")?.problem == "a merge key ('<<') takes a mapping or a list of mappings, found '5'")
        #expect(failure("m: {<<: [{a: 1}, x]}\n")?.mark == YAMLMark(line: 1, column: 18))
    }

    @Test func repeatedKeysAreReportedAtTheFirstAndSortedByText() {
        let error = failure("m:\n  z: 1\n  a: 1\n  z: 2\n  a: 2\n")
        #expect(error?.duplicateKeys == ["a", "z"])
        #expect(error?.mark == YAMLMark(line: 3, column: 3), "the first 'a', the smallest repeated key")
        #expect(failure("{a: 1, a: 2, a: 3}")?.duplicateKeys == ["a"])
    }

    @Test func keysAreEqualByTextAndTag() {
        #expect(failure("{x: 1, 'x': 2}")?.duplicateKeys == ["x"], "both strings")
        #expect(failure("{x: 1, ! x: 2}")?.duplicateKeys == ["x"], "`!` is a string")
        #expect(failure("{1: a, !!int 1: b}")?.duplicateKeys == ["1"])
        #expect(failure("{\"1\": a, 1: b}") == nil, "a string and an int")
        #expect(failure("{true: a, 'true': b, True: c}") == nil, "equal by text, not by value")
        #expect(failure("{x: a, !foo x: b}") == nil)
        #expect(failure("{? [a, b]: 1, ? [a, b]: 2}")?.duplicateKeys == ["[a, b]"])
        #expect(failure("{? [a]: 1, ? !!seq [a]: 2, ? ! [a]: 3}")?.duplicateKeys == ["[a]"])
        #expect(failure("{? {a: 1}: 1, ? {a: '1'}: 2}") == nil)
    }

    @Test func anInnerMappingIsCheckedBeforeItsParent() {
        let error = failure("a: 1\na: 2\nb: {c: 1, c: 2}\n")
        #expect(error?.duplicateKeys == ["c"], "Yams checked each mapping at its end: the inner one first")
        #expect(failure("b: {c: 1, c: 2}\nb: 1\n")?.duplicateKeys == ["c"])
    }

    @Test func nestingPastTheBoundIsAnErrorAtTheFirstTooDeep() throws {
        let depth = YAMLEventReader.maxDepth
        #expect(failure(String(repeating: "[", count: depth) + String(repeating: "]", count: depth)) == nil)
        let error = failure(String(repeating: "[", count: depth + 1) + String(repeating: "]", count: depth + 1))
        #expect(error?.mark == YAMLMark(line: 1, column: depth + 1))
        #expect(error?.problem == "lists and mappings nested more than 1000 deep")
        #expect(failure(String(repeating: "- ", count: depth + 1) + "x\n")?.mark == YAMLMark(line: 1, column: 2 * depth + 1))
    }

    @Test func syntaxErrorsCarryLibYAMLsWordsAndContext() {
        let error = failure("rules:\n  - name: a\n    match: {host: [x\n")
        #expect(error?.stage == .parser)
        #expect(error?.problem == "did not find expected ',' or ']'")
        #expect(error?.mark == YAMLMark(line: 4, column: 1))
        #expect(error?.context == "while parsing a flow sequence")
        #expect(error?.contextMark?.line == 3)
    }

    @Test func aControlCharacterIsAReaderErrorAtItsCharacter() {
        let error = failure("rules:\r\n  - name: caf\u{E9}\u{7F}\r\n")
        #expect(error?.stage == .reader)
        #expect(error?.problem == "control characters are not allowed")
        #expect(error?.mark == YAMLMark(line: 2, column: 15), "lines counted at line feeds, CRLF included")
    }
}
