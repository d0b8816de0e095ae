internal import CPCRE2

/// A regular expression compiled once by PCRE2 (JIT-compiled where the machine allows), matched over UTF-8 bytes
/// from any thread. Every match runs within a budget of backtracking steps and heap, so a catastrophic pattern
/// (`(a+)+$`) costs milliseconds, not minutes, on whichever thread matches it.
///
/// The compiled code and the match context are read-only once built (PCRE2 documents both as shareable between
/// threads), hence `@unchecked Sendable`.
final class PCRE2Pattern: @unchecked Sendable {
    /// Why a pattern does not compile, in PCRE2's words, and where (a byte offset into the pattern).
    struct CompileError: Error, Equatable {
        let message: String
        let offset: Int
    }

    /// How one match attempt ended.
    enum Outcome: Equatable {
        case match
        case noMatch
        /// The budget ran out before the match was decided.
        case overBudget
    }

    /// Backtracking steps and heap one match may use. A step is cheap (JIT: a few ns), so the default bounds a match
    /// to tens of milliseconds on this generation of machines.
    struct Budget {
        var steps: UInt32 = 2_000_000
        var heapKiB: UInt32 = 16 << 10

        static let standard = Budget()
    }

    /// Capture groups in the pattern, not counting the whole match.
    let groupCount: Int
    private let code: OpaquePointer
    private let matchContext: OpaquePointer
    /// The heap budget, also the most JIT stack one match may grow.
    private let heapKiB: UInt32

    private init(code: OpaquePointer, matchContext: OpaquePointer, heapKiB: UInt32) {
        self.code = code
        self.matchContext = matchContext
        self.heapKiB = heapKiB
        var count: UInt32 = 0
        pcre2_pattern_info_8(code, hp_pcre2_info_capturecount(), &count)
        groupCount = Int(count)
    }

    deinit {
        pcre2_match_context_free_8(matchContext)
        pcre2_code_free_8(code)
    }

    /// Compiles `pattern` with Unicode semantics (`\w`, `\d`, `\b` and case folding know all of Unicode) and any line
    /// terminator (`\n`, `\r\n`, `\r`, U+0085, U+2028, U+2029) ending a line for `.`, `$` and `^`, as ICU does.
    static func compile(_ pattern: String, budget: Budget = .standard) -> Result<PCRE2Pattern, CompileError> {
        guard let compileContext = pcre2_compile_context_create_8(nil) else {
            return .failure(CompileError(message: "out of memory", offset: 0))
        }
        defer { pcre2_compile_context_free_8(compileContext) }
        pcre2_set_newline_8(compileContext, hp_pcre2_newline_any())
        var errorCode: Int32 = 0
        var errorOffset = 0
        var text = pattern
        var compiled: OpaquePointer?
        _ = text.withUTF8 { bytes in
            Self.start(of: bytes) { base in
                compiled = pcre2_compile_8(base, bytes.count, hp_pcre2_compile_options(), &errorCode, &errorOffset,
                                           compileContext)
                return 0
            }
        }
        guard let code = compiled else {
            return .failure(CompileError(message: Self.message(for: errorCode), offset: errorOffset))
        }
        // Without JIT (a machine that refuses executable memory) PCRE2 interprets the same code, within the same budget.
        _ = pcre2_jit_compile_8(code, hp_pcre2_jit_complete())
        guard let matchContext = pcre2_match_context_create_8(nil) else {
            pcre2_code_free_8(code)
            return .failure(CompileError(message: "out of memory", offset: 0))
        }
        pcre2_set_match_limit_8(matchContext, budget.steps)
        pcre2_set_depth_limit_8(matchContext, budget.steps)
        pcre2_set_heap_limit_8(matchContext, budget.heapKiB)
        return .success(PCRE2Pattern(code: code, matchContext: matchContext, heapKiB: budget.heapKiB))
    }

    /// Scratch space for one thread's matches: the offsets of the last match's groups and, once a match needed more
    /// than the 32 KiB of machine stack JIT code starts with, a JIT stack of its own (up to the heap budget).
    final class Scratch {
        fileprivate let data: OpaquePointer?
        /// The pattern's match context with `jitStack` assigned; nil until a match asks for it.
        fileprivate var context: OpaquePointer?
        private var jitStack: OpaquePointer?

        init(for pattern: PCRE2Pattern) {
            data = pcre2_match_data_create_from_pattern_8(pattern.code, nil)
        }

        deinit {
            pcre2_match_data_free_8(data)
            pcre2_match_context_free_8(context)
            pcre2_jit_stack_free_8(jitStack)
        }

        /// Makes `context`, a copy of `shared` with a JIT stack of up to `maxBytes`; false when it has one already or
        /// memory runs out.
        fileprivate func growStack(from shared: OpaquePointer, maxBytes: Int) -> Bool {
            guard context == nil else { return false }
            guard let stack = pcre2_jit_stack_create_8(32 << 10, maxBytes, nil) else { return false }
            guard let copy = pcre2_match_context_copy_8(shared) else {
                pcre2_jit_stack_free_8(stack)
                return false
            }
            pcre2_jit_stack_assign_8(copy, nil, UnsafeMutableRawPointer(stack))
            (jitStack, context) = (stack, copy)
            return true
        }
    }

    /// Looks for the first match in `subject` at or after byte `offset`. `subject` must be valid UTF-8 (callers hold
    /// it as a `String` or validated it), and `offset` on a character boundary.
    func match(_ subject: UnsafeBufferPointer<UInt8>, from offset: Int, scratch: Scratch) -> Outcome {
        guard scratch.data != nil else { return .overBudget }
        var result = run(subject, from: offset, scratch: scratch)
        // Repeated groups over long text (`(a|b)*`) outgrow the JIT's first stack long before the step budget:
        // give this scratch a stack as large as the heap budget and match again.
        if result == hp_pcre2_error_jit_stacklimit(),
           scratch.growStack(from: matchContext, maxBytes: Int(heapKiB) << 10) {
            result = run(subject, from: offset, scratch: scratch)
        }
        if result >= 0 { return .match }
        if result == hp_pcre2_error_nomatch() { return .noMatch }
        return hp_pcre2_is_limit_error(result) != 0 ? .overBudget : .noMatch
    }

    private func run(_ subject: UnsafeBufferPointer<UInt8>, from offset: Int, scratch: Scratch) -> Int32 {
        let context = scratch.context ?? matchContext
        return Self.start(of: subject) { base in
            pcre2_match_8(code, base, subject.count, offset, hp_pcre2_no_utf_check(), scratch.data, context)
        }
    }

    /// The byte range of group `index` (0: the whole match) in the last match, or nil when it did not take part.
    func range(ofGroup index: Int, in scratch: Scratch) -> Range<Int>? {
        guard let data = scratch.data, index <= groupCount else { return nil }
        let vector = pcre2_get_ovector_pointer_8(data)!
        let start = vector[2 * index], end = vector[2 * index + 1]
        guard start != hp_pcre2_unset(), end >= start else { return nil }
        return start..<end
    }

    /// `bytes`' start, or a valid pointer for an empty buffer (PCRE2 refuses NULL even with length 0).
    private static func start(of bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafePointer<UInt8>) -> Int32) -> Int32 {
        if let base = bytes.baseAddress { return body(base) }
        var zero: UInt8 = 0
        return withUnsafePointer(to: &zero) { body($0) }
    }

    private static func message(for code: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let length = pcre2_get_error_message_8(code, &buffer, buffer.count)
        guard length > 0 else { return "not a valid regular expression (PCRE2 error \(code))" }
        return String(decoding: buffer[..<Int(length)], as: UTF8.self)
    }
}
