import ProxyModel

/// One `replace` item: a regex (with `$1`… in `with`) or a literal text.
struct Replacement: Sendable {
    enum Pattern: Sendable {
        /// The regex, and `with` read as its template once, at load.
        case regex(CompiledRegex, ReplacementTemplate)
        case text(String)
    }

    var pattern: Pattern
    var with: String
}

/// The `body:` of one rule's `request` or `response`: `file`, then `replace`, then `json`, in that order.
struct BodyTransformStep: Sendable {
    var rule: String
    /// Content of `file:` (read at load) and the path as written, for notes.
    var file: (bytes: [UInt8], name: String)?
    var replacements: [Replacement] = []
    var json: JSONEdit?
}

/// Bounds that keep a body transform from stalling an exchange (the server runs transforms off the event loop).
public enum BodyTransformLimits {
    /// Bodies larger than this are left unchanged by `replace` and `json` (the server's `--body-limit` usually
    /// stops them earlier).
    public static let maxInputBytes = 16 << 20
    /// A decoded (gunzipped) body may not grow past this, nor a regex replacement's result; beyond it the body is
    /// left as it was.
    public static let maxDecodedBytes = 64 << 20
    /// Wall-clock budget for all regexes of one body. A catastrophic pattern is stopped when it runs out, and the
    /// body is left unchanged with a note.
    public static let regexBudget: Duration = .seconds(2)
}

/// Every matching rule's body steps for one direction, applied in file order to a decoded body.
struct BodyTransformChain: BodyTransforming {
    var steps: [BodyTransformStep]

    var ruleNames: [String] { steps.map(\.rule) }

    func apply(to body: [UInt8], headers: inout HeaderFields) -> (body: [UInt8], notes: [String]) {
        var notes: [String] = []
        var current = body
        var decoded = false
        if let encoding = headers["Content-Encoding"], !ContentCoding.isIdentity(encoding) {
            switch ContentCoding.decode(body, encoding: encoding) {
            case .success(let plain):
                current = plain
                decoded = true
            case .failure(let failure):
                // A body we cannot decode can only be replaced whole (`file`); other steps leave it alone.
                if let file = steps.last(where: { $0.file != nil })?.file {
                    headers.remove("Content-Encoding")
                    BodyTransformChain.fixLength(&headers, count: file.bytes.count)
                    return (file.bytes, ["body replaced from \(file.name)"])
                }
                return (body, ["body left unchanged: \(failure.reason)"])
            }
        }
        let deadline = ContinuousClock.now.advanced(by: BodyTransformLimits.regexBudget)
        for step in steps {
            if let file = step.file {
                current = file.bytes
                notes.append("body replaced from \(file.name)")
            }
            if !step.replacements.isEmpty {
                current = BodyTransformChain.replace(current, step.replacements, rule: step.rule, deadline: deadline,
                                                     notes: &notes)
            }
            if let json = step.json {
                current = BodyTransformChain.edit(current, json, rule: step.rule, notes: &notes)
            }
        }
        if decoded || current != body {
            if decoded { headers.remove("Content-Encoding") }
            BodyTransformChain.fixLength(&headers, count: current.count)
        }
        return (current, notes)
    }

    static func fixLength(_ headers: inout HeaderFields, count: Int) {
        if headers.contains("Transfer-Encoding") {
            headers.remove("Content-Length")
        } else {
            headers.set("Content-Length", String(count))
        }
    }

    static func replace(_ body: [UInt8], _ replacements: [Replacement], rule: String, deadline: ContinuousClock.Instant,
                        notes: inout [String]) -> [UInt8] {
        guard body.count <= BodyTransformLimits.maxInputBytes else {
            notes.append("replace (\(rule)): body of \(body.count) bytes is over the transform limit; unchanged")
            return body
        }
        guard var text = String(validating: body, as: UTF8.self) else {
            notes.append("replace (\(rule)): body is not UTF-8 text; unchanged")
            return body
        }
        for replacement in replacements {
            switch replacement.pattern {
            case .text(let literal):
                guard fits(replacing: literal, with: replacement.with, in: text,
                           maxBytes: BodyTransformLimits.maxDecodedBytes) else {
                    notes.append("replace (\(rule)): text '\(literal)' would make the body larger than "
                                 + "\(BodyTransformLimits.maxDecodedBytes) bytes; body unchanged")
                    return body
                }
                text = text.replacing(literal, with: replacement.with)
            case .regex(let regex, let template):
                switch regex.replacing(in: text, with: template, deadline: deadline,
                                       maxBytes: BodyTransformLimits.maxDecodedBytes) {
                case .success(let replaced):
                    text = replaced
                case .failure(.timeBudget):
                    notes.append("replace (\(rule)): regex /\(regex.pattern)/ ran out of its time budget; body unchanged")
                    return body
                case .failure(.matchBudget):
                    let budget = PCRE2Pattern.Budget.standard
                    notes.append("replace (\(rule)): regex /\(regex.pattern)/ needed more than \(budget.steps) backtracking "
                                 + "steps (or \(budget.heapKiB >> 10) MiB) for one match; body unchanged")
                    return body
                case .failure(.tooLarge):
                    notes.append("replace (\(rule)): regex /\(regex.pattern)/ would make the body larger than "
                                 + "\(BodyTransformLimits.maxDecodedBytes) bytes; body unchanged")
                    return body
                }
            }
        }
        return Array(text.utf8)
    }

    /// Whether `text` with every `literal` replaced by `with` stays within `maxBytes` (counted only when it grows).
    static func fits(replacing literal: String, with: String, in text: String, maxBytes: Int) -> Bool {
        let growth = with.utf8.count - literal.utf8.count
        guard growth > 0 else { return true }
        var size = text.utf8.count
        var rest = text[...]
        while let found = rest.firstRange(of: literal) {
            size += growth
            if size > maxBytes { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }

    static func edit(_ body: [UInt8], _ edit: JSONEdit, rule: String, notes: inout [String]) -> [UInt8] {
        guard body.count <= BodyTransformLimits.maxInputBytes else {
            notes.append("json (\(rule)): body of \(body.count) bytes is over the transform limit; unchanged")
            return body
        }
        let document: JSONValue
        do {
            document = try JSONValue.parse(body)
        } catch {
            notes.append("json (\(rule)): body is not JSON (\(error)); unchanged")
            return body
        }
        let (result, editNotes) = edit.apply(to: document)
        notes += editNotes.map { "\($0) (\(rule))" }
        if result == document { return body }
        return Array(result.serialized().utf8)
    }
}
