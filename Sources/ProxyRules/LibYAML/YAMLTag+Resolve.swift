extension YAMLTag {
    /// The tag of a plain scalar with no tag of its own: the first of bool, int, float, merge, null, timestamp and
    /// value whose pattern the whole text matches, else `!!str`. These are Yams' default resolver rules (YAML 1.1
    /// spellings: `yes`/`on`/`off` are booleans, `0o7` and `1:30` integers), written out by hand so that no regular
    /// expression engine is needed; `YAMLTagResolveTests` hold them to Yams' patterns.
    static func resolve(plain text: String) -> YAMLTag {
        var text = text
        return text.withUTF8 { bytes in
            if isBool(bytes) { return .bool }
            if isInt(bytes) { return .int }
            if isFloat(bytes) { return .float }
            if bytes.elementsEqual("<<".utf8) { return .merge }
            if isNull(bytes) { return .null }
            if isTimestamp(bytes) { return .timestamp }
            if bytes.elementsEqual("=".utf8) { return .value }
            return .str
        }
    }

    private static let bools: [String] = ["yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE",
                                           "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"]
    private static let nulls: [String] = ["", "~", "null", "Null", "NULL"]

    private static func isBool(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.count <= 5 && bools.contains { bytes.elementsEqual($0.utf8) }
    }

    private static func isNull(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.count <= 4 && nulls.contains { bytes.elementsEqual($0.utf8) }
    }

    /// `[-+]?0b[0-1_]+ | [-+]?0o?[0-7_]+ | [-+]?(0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+ | [-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`
    private static func isInt(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var start = Cursor(bytes)
        start.skipSign()
        var cursor = start
        if cursor.take("0") {
            if cursor.atEnd { return true }
            var binary = cursor
            if binary.take("b"), binary.takeAll(where: { $0 == ascii("0") || $0 == ascii("1") || $0 == ascii("_") }) > 0,
               binary.atEnd { return true }
            var hex = cursor
            if hex.take("x"), hex.takeAll(where: { isHexDigit($0) || $0 == ascii("_") }) > 0, hex.atEnd { return true }
            var octal = cursor
            _ = octal.take("o")
            if octal.takeAll(where: { (ascii("0")...ascii("7")).contains($0) || $0 == ascii("_") }) > 0, octal.atEnd {
                return true
            }
            return false
        }
        guard cursor.take(where: { (ascii("1")...ascii("9")).contains($0) }) else { return false }
        cursor.takeAll(where: { isDigit($0) || $0 == ascii("_") })
        if cursor.atEnd { return true }
        return cursor.takeSexagesimal() && cursor.atEnd
    }

    /// `[-+]?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)? | \.[0-9_]+([eE][-+][0-9]+)?
    ///  | [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)`
    private static func isFloat(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let start = Cursor(bytes)
        // \.[0-9_]+([eE][-+][0-9]+)?  and  \.(nan|NaN|NAN): no sign.
        var dot = start
        if dot.take(".") {
            var fraction = dot
            if fraction.takeAll(where: { isDigit($0) || $0 == ascii("_") }) > 0 {
                if fraction.atEnd { return true }
                if fraction.take(where: { $0 == ascii("e") || $0 == ascii("E") }),
                   fraction.take(where: { $0 == ascii("-") || $0 == ascii("+") }),
                   fraction.takeAll(where: isDigit) > 0, fraction.atEnd { return true }
            }
            if ["nan", "NaN", "NAN"].contains(where: { dot.rest.elementsEqual($0.utf8) }) { return true }
        }
        var signed = start
        signed.skipSign()
        // [-+]?\.(inf|Inf|INF)
        var infinity = signed
        if infinity.take("."), ["inf", "Inf", "INF"].contains(where: { infinity.rest.elementsEqual($0.utf8) }) {
            return true
        }
        // [-+]?[0-9][0-9_]* then a fraction and exponent, or base-60 parts and a fraction.
        var number = signed
        guard number.take(where: isDigit) else { return false }
        number.takeAll(where: { isDigit($0) || $0 == ascii("_") })
        var sexagesimal = number
        if sexagesimal.takeSexagesimal(), sexagesimal.take(".") {
            sexagesimal.takeAll(where: { isDigit($0) || $0 == ascii("_") })
            if sexagesimal.atEnd { return true }
        }
        if number.take(".") { number.takeAll(where: { isDigit($0) || $0 == ascii("_") }) }
        if number.atEnd { return true }
        guard number.take(where: { $0 == ascii("e") || $0 == ascii("E") }) else { return false }
        number.skipSign()
        return number.takeAll(where: isDigit) > 0 && number.atEnd
    }

    /// `[0-9]{4}-[0-9]{2}-[0-9]{2}
    ///  | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?`
    private static func isTimestamp(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var cursor = Cursor(bytes)
        guard cursor.takeDigits(4...4), cursor.take("-") else { return false }
        var date = cursor
        if date.takeDigits(2...2), date.take("-"), date.takeDigits(2...2), date.atEnd { return true }
        guard cursor.takeDigits(1...2), cursor.take("-"), cursor.takeDigits(1...2) else { return false }
        if !cursor.take(where: { $0 == ascii("T") || $0 == ascii("t") }) {
            guard cursor.takeAll(where: isBlank) > 0 else { return false }
        }
        guard cursor.takeDigits(1...2), cursor.take(":"), cursor.takeDigits(2...2), cursor.take(":"),
              cursor.takeDigits(2...2) else { return false }
        if cursor.take(".") { cursor.takeAll(where: isDigit) }
        if cursor.atEnd { return true }
        cursor.takeAll(where: isBlank)
        if cursor.take("Z") { return cursor.atEnd }
        guard cursor.take(where: { $0 == ascii("-") || $0 == ascii("+") }), cursor.takeDigits(1...2) else { return false }
        if cursor.atEnd { return true }
        return cursor.take(":") && cursor.takeDigits(2...2) && cursor.atEnd
    }

    private static func ascii(_ character: Unicode.Scalar) -> UInt8 { UInt8(character.value) }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    /// A position in the text being matched; a copy is a backtracking point.
    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }
        var rest: UnsafeBufferPointer<UInt8>.SubSequence { bytes[index...] }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            take { $0 == UInt8(character.value) }
        }

        mutating func take(where predicate: (UInt8) -> Bool) -> Bool {
            guard index < bytes.count, predicate(bytes[index]) else { return false }
            index += 1
            return true
        }

        @discardableResult
        mutating func takeAll(where predicate: (UInt8) -> Bool) -> Int {
            let start = index
            while take(where: predicate) {}
            return index - start
        }

        mutating func skipSign() {
            _ = take { $0 == 0x2D || $0 == 0x2B }
        }

        /// Between `range.lowerBound` and `range.upperBound` ASCII digits, as many as there are.
        mutating func takeDigits(_ range: ClosedRange<Int>) -> Bool {
            let start = index
            while index - start < range.upperBound, take(where: YAMLTag.isDigit) {}
            return index - start >= range.lowerBound
        }

        /// `(:[0-5]?[0-9])+`: one or more base-60 parts.
        mutating func takeSexagesimal() -> Bool {
            var parts = 0
            while index < bytes.count, bytes[index] == 0x3A {
                var part = self
                part.index += 1
                let first = part.index
                guard part.take(where: YAMLTag.isDigit) else { break }
                // `[0-5][0-9]` when a second digit follows a 0-5; a lone digit otherwise.
                if bytes[first] <= 0x35 { _ = part.take(where: YAMLTag.isDigit) }
                self = part
                parts += 1
            }
            return parts > 0
        }
    }
}
