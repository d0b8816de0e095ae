/// Appends values to one buffer in a fixed binary layout: integers and doubles as 8 little-endian bytes,
/// strings and byte arrays as a length and their bytes, optionals behind a presence byte. `PackedReader` reads them
/// back in the same order. Nothing is self-describing: writer and reader must agree field by field.
/// Writes go straight to raw memory (no `Array` growth checks per byte); the buffer is freed with the writer.
struct PackedWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(64, capacity)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// Lends the bytes written so far to `body` (the writer stays alive, unchanged, while it runs).
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    private mutating func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        let grown = max(capacity * 2, count + extra)
        let moved = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
        moved.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = moved
        capacity = grown
    }

    mutating func int(_ value: Int) {
        reserve(8)
        base.storeBytes(of: Int64(value).littleEndian, toByteOffset: count, as: Int64.self)
        count += 8
    }

    mutating func double(_ value: Double) {
        int(Int(Int64(bitPattern: value.bitPattern)))
    }

    mutating func bool(_ value: Bool) {
        reserve(1)
        base.storeBytes(of: value ? 1 : 0, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        int(bytes.count)
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    mutating func raw(_ value: [UInt8]) {
        value.withUnsafeBytes { append($0) }
    }

    /// A presence byte, then the value if there is one.
    mutating func optional<T>(_ value: T?, _ write: (inout PackedWriter, T) -> Void) {
        bool(value != nil)
        if let value { write(&self, value) }
    }

    mutating func array<T>(_ values: [T], _ write: (inout PackedWriter, T) -> Void) {
        int(values.count)
        for value in values { write(&self, value) }
    }
}

/// Reads what a `PackedWriter` wrote, in the same order. The bytes come from this process's own writer, so a
/// short or malformed buffer is a programming error: it traps rather than returning a half-read value.
/// The bytes must stay alive and unchanged while it reads (`FlowSegment` keeps them so).
struct PackedReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    /// Set to read a record without its captured bodies (they are skipped).
    var skipsBodies = false

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    private mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        precondition(count >= 0 && offset + count <= bytes.count, "packed flow: read past the end")
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func int() -> Int {
        Int(Int64(littleEndian: take(8).loadUnaligned(as: Int64.self)))
    }

    mutating func double() -> Double {
        Double(bitPattern: UInt64(bitPattern: Int64(int())))
    }

    mutating func bool() -> Bool {
        take(1)[0] != 0
    }

    mutating func string() -> String {
        String(decoding: take(int()), as: UTF8.self)
    }

    mutating func raw() -> [UInt8] {
        Array(take(int()))
    }

    mutating func skipRaw() {
        _ = take(int())
    }

    mutating func optional<T>(_ read: (inout PackedReader) -> T) -> T? {
        bool() ? read(&self) : nil
    }

    mutating func array<T>(_ read: (inout PackedReader) -> T) -> [T] {
        let count = int()
        precondition(count >= 0 && count <= bytes.count - offset, "packed flow: bad count")
        var values: [T] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(read(&self)) }
        return values
    }

    var isAtEnd: Bool { offset == bytes.count }
}
