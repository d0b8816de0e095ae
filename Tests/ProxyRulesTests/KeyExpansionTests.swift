@testable import ProxyRules
import Testing

/// `KeyExpansion` counts mapping-key nodes as Yams will hash them: aliases expanded, per document.
@Suite struct KeyExpansionTests {
    private func oversized(_ text: String, limit: Int) -> KeyExpansion.Oversized? {
        KeyExpansion.firstOversized(in: text, limit: limit)
    }

    @Test func plainKeysCountOneEach() {
        #expect(oversized("a: 1\nb: {c: 2, d: [e]}\n", limit: 4) == nil)
        #expect(oversized("a: 1\nb: {c: 2, d: [e]}\n", limit: 3) == KeyExpansion.Oversized(line: 2, column: 11, nodes: 4))
    }

    @Test func aliasedKeysCountWhatTheyExpandTo() {
        let text = "a: &x [1, 2, 3]\n? *x\n: v\n"
        #expect(oversized(text, limit: 5) == nil, "keys a (1) and *x (a list and 3 items: 4)")
        #expect(oversized(text, limit: 4) == KeyExpansion.Oversized(line: 2, column: 3, nodes: 5))
    }

    @Test func anchorsEndWithTheirDocument() {
        #expect(oversized("--- &x [1, 2, 3]\n--- {? *x : 1}\n", limit: 2) == nil, "an undefined alias is left to Yams")
    }

    @Test func textLibYAMLRejectsIsLeftToYams() {
        #expect(oversized("a: [1, 2\n", limit: 100) == nil)
        #expect(oversized("", limit: 0) == nil)
    }
}
