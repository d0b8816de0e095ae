/// One header line as it travels: the name keeps the case the sender used.
public struct HeaderField: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An ordered list of header fields: order, case and duplicates are kept exactly; lookups by name ignore case.
/// A value type, usable from any thread.
public struct HeaderFields: Sendable, Hashable, RandomAccessCollection, ExpressibleByArrayLiteral {
    public private(set) var fields: [HeaderField]

    public init(_ fields: [HeaderField] = []) { self.fields = fields }
    public init(arrayLiteral elements: (String, String)...) {
        self.fields = elements.map { HeaderField(name: $0.0, value: $0.1) }
    }

    public var startIndex: Int { fields.startIndex }
    public var endIndex: Int { fields.endIndex }
    public subscript(position: Int) -> HeaderField { fields[position] }

    /// The first value for `name` (case-insensitive), or nil.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// The bytes the fields take as `Name: value` lines (each with `: ` and CRLF), for memory accounting.
    public var lineBytes: Int {
        var total = 0
        for field in fields { total += field.name.utf8.count + field.value.utf8.count + 4 }
        return total
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        var values: [String] = []  // (no allocation when there is none: the common case)
        for field in fields where field.name.caseInsensitiveEquals(name) { values.append(field.value) }
        return values
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { $0.name.caseInsensitiveEquals(name) }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(HeaderField(name: name, value: value))
    }

    /// Replaces every field named `name` by one field, kept at the position of the first; appended when absent.
    public mutating func set(_ name: String, _ value: String) {
        if let first = fields.firstIndex(where: { $0.name.caseInsensitiveEquals(name) }) {
            fields[first].value = value
            var index = fields.index(after: first)
            while index < fields.endIndex {
                if fields[index].name.caseInsensitiveEquals(name) { fields.remove(at: index) } else { index += 1 }
            }
        } else {
            add(name, value)
        }
    }

    /// Removes every field named `name`. Looks before it writes: `removeAll(where:)` would take the array for
    /// writing, copying it when shared, even with nothing to remove (the usual case of a rule's `remove_headers`).
    public mutating func remove(_ name: String) {
        guard fields.contains(where: { $0.name.caseInsensitiveEquals(name) }) else { return }
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    public mutating func removeAll(where shouldRemove: (HeaderField) -> Bool) {
        fields.removeAll(where: shouldRemove)
    }
}

extension String {
    /// ASCII case-insensitive comparison, as HTTP field names are compared.
    /// Native strings are compared as two byte buffers; `zip` over the two UTF-8 views cost a request thousands of
    /// instructions in header lookups.
    @inlinable
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        let lhs = self.utf8, rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        if let equal = lhs.withContiguousStorageIfAvailable({ a in
            rhs.withContiguousStorageIfAvailable { b in String.foldedEqual(a, b) }
        }), let equal {
            return equal
        }
        for (a, b) in zip(lhs, rhs) where a != b {
            let la = (a >= 65 && a <= 90) ? a + 32 : a
            let lb = (b >= 65 && b <= 90) ? b + 32 : b
            if la != lb { return false }
        }
        return true
    }

    /// The string with ASCII capitals lowercased and nothing else changed, as hosts and media types compare; the
    /// string itself, with no allocation, when it has no capital (the usual case). `lowercased()` also folds
    /// non-ASCII letters, and costs thousands of instructions.
    public func asciiLowercased() -> String {
        guard utf8.contains(where: { $0 >= 65 && $0 <= 90 }) else { return self }
        return String(decoding: utf8.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// Two byte runs of equal length, equal but for ASCII letter case.
    @inlinable
    static func foldedEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        for i in 0..<a.count where a[i] != b[i] {
            // Equal but for case only if both are letters: OR-ing 0x20 lowercases a letter.
            let la = a[i] | 0x20
            guard la == b[i] | 0x20, la >= 0x61, la <= 0x7A else { return false }
        }
        return true
    }
}
