@testable import ProxyRules
import Testing

/// `AliasExpansion` counts a document's nodes as the composer and the rule parser walk them: aliases expanded,
/// per document.
@Suite struct AliasExpansionTests {
    private func oversized(_ text: String, limit: Int) -> AliasExpansion.Oversized? {
        AliasExpansion.firstOversized(in: text, limit: limit)
    }

    @Test func everyNodeCountsOnce() {
        // the mapping, a, 1, b, the inner mapping, c, 2, d, the list, e
        #expect(oversized("a: 1\nb: {c: 2, d: [e]}\n", limit: 10) == nil)
        #expect(oversized("a: 1\nb: {c: 2, d: [e]}\n", limit: 9) == AliasExpansion.Oversized(line: 2, column: 15, nodes: 10))
    }

    @Test func aliasesCountWhatTheyExpandTo() {
        let text = "a: &x [1, 2, 3]\n? *x\n: v\n"
        #expect(oversized(text, limit: 11) == nil, "the mapping, a, the list and 3 items, *x (4), v")
        #expect(oversized(text, limit: 10) == AliasExpansion.Oversized(line: 3, column: 3, nodes: 11))
        #expect(oversized(text, limit: 9) == AliasExpansion.Oversized(line: 2, column: 3, nodes: 10))
    }

    @Test func aliasesInsideAnchorsMultiply() {
        let text = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
        // a: 3; b: 1 + 2×3 = 7; c: 1 + 2×7 = 15; with the mapping and the keys a, b, c: 1 + 3 + 3 + 7 + 15 = 29
        #expect(oversized(text, limit: 29) == nil)
        #expect(oversized(text, limit: 28) == AliasExpansion.Oversized(line: 3, column: 9, nodes: 29))
    }

    @Test func anchorsEndWithTheirDocument() {
        #expect(oversized("--- &x [1, 2, 3]\n--- {? *x : 1}\n", limit: 4) == nil, "an undefined alias is left to the composer")
    }

    @Test func textLibYAMLRejectsIsLeftToTheComposer() {
        #expect(oversized("a: [1, 2\n", limit: 100) == nil)
        #expect(oversized("", limit: 0) == nil)
    }
}
