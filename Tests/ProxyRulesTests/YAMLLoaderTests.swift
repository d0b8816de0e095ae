@testable import ProxyRules
import Testing

/// What a rule file's YAML reads as, end to end through `RuleLoader` (the messages `hookproxy check` prints). The
/// expectations are what the loader said with Yams, kept when libyaml's events and `YAMLComposer` replaced it, but
/// for the four corners marked "changed" (each says why).
@Suite struct YAMLLoaderTests {
    @Test func aRepeatedKeyIsAnErrorAtItsFirstOccurrence() {
        #expect(errorsOf("rules:\n  - name: a\n    name: b\n") == ["r.yaml:2:5: duplicate key 'name' in one mapping"])
        #expect(errorsOf("rules:\n  - {name: a, name: a, match: 1, match: 2}\n") ==
                ["r.yaml:2:24: duplicate key 'match', 'name' in one mapping"])
        #expect(errorsOf("rules: [{name: a, response: {set_headers: {z: 1, z: 2, a: 1, a: 2}}}]\n") ==
                ["r.yaml:1:56: duplicate key 'a', 'z' in one mapping"])
        #expect(errorsOf("rules: [{name: a, response: {set_headers: {X: 1, 'X': 2}}}]\n") ==
                ["r.yaml:1:44: duplicate key 'X' in one mapping"])
        #expect(errorsOf("rules: [{name: a, response: {set_headers: {1: a, !!int 1: b}}}]\n") ==
                ["r.yaml:1:44: duplicate key '1' in one mapping"])
    }

    @Test func keysOfDifferentTypesAreDifferentKeys() throws {
        for headers in ["{\"1\": a, 1: b}", "{1: a, !!str 1: b}", "{x: a, !foo x: b}", "{true: a, 'true': b, yes: c, Yes: d}"] {
            let set = try ruleSet("rules: [{name: a, response: {set_headers: \(headers)}}]\n")
            #expect(set.rules.first?.responseEdit?.set.count == headers.filter { $0 == "," }.count + 1, "\(headers)")
        }
    }

    /// Changed: Yams named a list or mapping key '<uncovertable>'.
    @Test func aRepeatedListKeyIsShownInFlowStyle() {
        #expect(errorsOf("rules: [{name: a, response: {set_headers: {? [a]: 1, ? [a]: 2}}}]\n") ==
                ["r.yaml:1:46: duplicate key '[a]' in one mapping"])
    }

    /// A rule file can share a match (or any mapping) between rules with an anchor and a merge key; the rule's own
    /// keys win. (Before, `<<` was "unknown key '<<'".)
    @Test func mergeKeysShareMappingsBetweenRules() throws {
        let text = """
        rules:
          - name: a
            match: &api {host: api.example.com, path: /v1/*}
            respond: {status: 200}
          - name: b
            match: {<<: *api, path: /v2/*, method: POST}
            respond: {status: 201}
        """
        #expect(errorsOf(text) == [])
        let rules = try ruleSet(text).rules
        #expect(rules.map { $0.match.hosts.map(\.pattern) } == [["api.example.com"], ["api.example.com"]])
        #expect(rules.map { $0.match.path?.pattern } == ["/v1/*", "/v2/*"], "the rule's own path wins")
        #expect(rules[1].match.methods == ["POST"])
        #expect(errorsOf("rules:\n  - name: a\n    <<: {a: 1}\n    <<: {b: 1}\n") == ["r.yaml:3:5: duplicate key '<<' in one mapping"])
        // A merged key the rule does not know is reported where it is written.
        #expect(errorsOf("rules:\n  - name: a\n    <<: {nope: 1}\n    respond: {status: 200}\n") ==
                ["r.yaml:3:10: unknown key 'nope' in 'rule' — did you mean 'name'?"])
    }

    @Test func anAliasedValueIsReportedWhereItIsWritten() {
        #expect(errorsOf("rules:\n  - name: r\n    match: &m {host: 'a/b'}\n  - name: s\n    match: *m\n") ==
                ["r.yaml:3:22: bad host glob 'a/b': a host glob holds a host name only (match the path with 'path')",
                 "r.yaml:3:22: bad host glob 'a/b': a host glob holds a host name only (match the path with 'path')"])
        #expect(errorsOf("rules:\n  - &r {name: a}\n  - *r\n") ==
                ["r.yaml:2:15: duplicate rule name 'a' (first defined at r.yaml:2:15); names are unique across all files"])
        #expect(errorsOf("rules: *x\n") == ["r.yaml:1:8: not valid YAML: found undefined alias"])
        #expect(errorsOf("rules: &a [*a]\n") == ["r.yaml:1:12: not valid YAML: found undefined alias"])
    }

    @Test func plainNullsAreNothingAndQuotedOnesText() throws {
        for value in ["~", "null", ""] {
            #expect(errorsOf("rules:\n  - name: \(value)\n") == ["r.yaml:2:\(value.isEmpty ? 10 : 11): 'name' must not be empty"])
        }
        #expect(try ruleSet("rules:\n  - name: 'null'\n").rules.first?.name == "null")
        #expect(try ruleSet("rules:\n  - name: !!null x\n").rules.first?.name == "x", "a tag does not change the text")
        for empty in ["rules: ~\n", "rules:\n", "rules: ''\n", "rules: null\n"] {
            #expect(try ruleSet(empty).rules.isEmpty, "\(empty)")
        }
        #expect(errorsOf("rules: Null\n") == ["r.yaml:1:8: 'rules' must be a list of rules (each starting with '- name:'), found 'Null'"])
        #expect(errorsOf("---\n") == ["r.yaml:2:1: 'top level' must be a mapping, found nothing"])
    }

    @Test func booleansAndNumbersAreReadFromTheText() throws {
        #expect(try ruleSet("rules:\n  - name: a\n    intercept: True\n").rules.first?.intercept == true)
        #expect(try ruleSet("rules:\n  - name: a\n    intercept: 'false'\n").rules.first?.intercept == false)
        #expect(errorsOf("rules:\n  - name: a\n    intercept: yes\n") == ["r.yaml:3:16: 'intercept' must be true or false, found 'yes'"])
        #expect(errorsOf("rules:\n  - name: a\n    match: {port: 0x50}\n") == ["r.yaml:3:19: 'match.port' must be a whole number, found '0x50'"])
        #expect(try ruleSet("rules:\n  - name: a\n    match: {port: '8080'}\n").rules.first?.match.ports == [8080])
    }

    @Test func aNULFromAnEscapeReachesTheValue() throws {
        let set = try ruleSet("rules:\n  - name: a\n    respond: {body: \"a\\0b\"}\n")
        #expect(set.rules.first.flatMap { rule -> [UInt8]? in
            if case .respond(let respond)? = rule.target { return respond.body }
            return nil
        } == [0x61, 0x00, 0x62])
        #expect(errorsOf("rules:\n  - name: a\n    respond: {headers: {X: \"a\\0b\"}}\n") ==
                ["r.yaml:3:28: the value of header 'X' holds a line break or control character"])
    }

    @Test func syntaxErrorsKeepLibYAMLsWords() {
        #expect(errorsOf("rules:\n  - name: a\n    match: {host: \"x\n") ==
                ["r.yaml:4:1: not valid YAML: found unexpected end of stream (while scanning a quoted scalar at line 3)"])
        #expect(errorsOf("rules:\n  - name: a\n  match: x\n") ==
                ["r.yaml:3:3: not valid YAML: did not find expected '-' indicator (while parsing a block collection at line 2)"])
        #expect(errorsOf("rules: []\n]\n") ==
                ["r.yaml:2:1: not valid YAML: did not find expected key (while parsing a block mapping at line 1)"])
        #expect(errorsOf("%YAML 1.3\n---\nrules: []\n") == ["r.yaml:1:1: not valid YAML: found incompatible YAML document"])
        #expect(errorsOf("rules:\n  - name: a\u{1}\n") == ["r.yaml:2:12: not valid YAML: control characters are not allowed"])
    }

    /// Changed: Yams counted lines at "\n" characters, and "\r\n" is one character that is not "\n".
    @Test func aControlCharacterInACRLFFileIsReportedOnItsLine() {
        #expect(errorsOf("rules:\r\n  - name: a\r\n  - name: b\u{7F}\r\n") ==
                ["r.yaml:3:12: not valid YAML: control characters are not allowed"])
    }

    /// Changed: Yams said "but found another document (expected a single document in the stream at line 1)".
    @Test func aSecondDocumentIsAnErrorAtItsStart() throws {
        #expect(errorsOf("rules: []\n---\nrules: []\n") ==
                ["r.yaml:2:1: not valid YAML: a second document starts here; a rule file is one YAML document"])
        #expect(try ruleSet("rules: []\n...\n").rules.isEmpty)
    }

    /// Changed: Yams' libyaml (a newer one than Debian's) stopped near 1000 levels with "Maximum nesting level
    /// reached, set with yaml_set_max_nest_level())" at 1:1; Debian's 0.2.5 has no bound, so the reader keeps one.
    @Test(arguments: [String(repeating: "[", count: 5000),
                      String(repeating: "[", count: 1001) + String(repeating: "]", count: 1001)])
    func nestingPast1000IsAnErrorWhereItHappens(_ text: String) {
        #expect(errorsOf(text) == ["r.yaml:1:1001: not valid YAML: lists and mappings nested more than 1000 deep"])
    }

    @Test func valuesNestedToTheBoundLoad() throws {
        // The document's mapping, `rules`' list, the rule, response, body, json and set: 7 levels above the value.
        let levels = YAMLEventReader.maxDepth - 7
        let value = String(repeating: "[", count: levels) + "1" + String(repeating: "]", count: levels)
        let set = try ruleSet("rules: [{name: a, response: {body: {json: {set: {a: \(value)}}}}}]\n")
        #expect(set.rules.count == 1)
        #expect(!errorsOf("rules: [{name: a, response: {body: {json: {set: {a: [\(value)]}}}}}]\n").isEmpty)
    }
}
