import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Date formats of the logs, without a formatter object or `String(format:)` (thread-safe, one allocation: these run
/// for every logged exchange).
enum Timestamp {
    /// `2025-01-31T12:34:56.789Z` (UTC, milliseconds), as JSONL `start` and HAR `startedDateTime`.
    static func iso8601(_ date: Date) -> String {
        let (tm, millis) = parts(date, utc: true)
        return String(unsafeUninitializedCapacity: 32) { buffer in
            var index = 0
            put(Int(tm.tm_year) + 1900, width: 4, into: buffer, at: &index)
            put("-", into: buffer, at: &index)
            put(Int(tm.tm_mon) + 1, width: 2, into: buffer, at: &index)
            put("-", into: buffer, at: &index)
            put(Int(tm.tm_mday), width: 2, into: buffer, at: &index)
            put("T", into: buffer, at: &index)
            putTime(tm, millis: millis, into: buffer, at: &index)
            put("Z", into: buffer, at: &index)
            return index
        }
    }

    /// `12:34:56.789` in local time (or UTC), as the console line starts.
    static func clock(_ date: Date, utc: Bool = false) -> String {
        let (tm, millis) = parts(date, utc: utc)
        return String(unsafeUninitializedCapacity: 16) { buffer in
            var index = 0
            putTime(tm, millis: millis, into: buffer, at: &index)
            return index
        }
    }

    private static func putTime(_ tm: tm, millis: Int, into buffer: UnsafeMutableBufferPointer<UInt8>,
                                at index: inout Int) {
        put(Int(tm.tm_hour), width: 2, into: buffer, at: &index)
        put(":", into: buffer, at: &index)
        put(Int(tm.tm_min), width: 2, into: buffer, at: &index)
        put(":", into: buffer, at: &index)
        put(Int(tm.tm_sec), width: 2, into: buffer, at: &index)
        put(".", into: buffer, at: &index)
        put(millis, width: 3, into: buffer, at: &index)
    }

    private static func put(_ character: Unicode.Scalar, into buffer: UnsafeMutableBufferPointer<UInt8>,
                            at index: inout Int) {
        buffer[index] = UInt8(ascii: character)
        index += 1
    }

    /// `value` in decimal, zero-padded to `width` characters as `%0*d` pads it (a minus sign counts).
    private static func put(_ value: Int, width: Int, into buffer: UnsafeMutableBufferPointer<UInt8>,
                            at index: inout Int) {
        var digits = 1
        var rest = value.magnitude
        while rest >= 10 { rest /= 10; digits += 1 }
        if value < 0 { put("-", into: buffer, at: &index) }
        for _ in 0..<max(0, width - digits - (value < 0 ? 1 : 0)) { put("0", into: buffer, at: &index) }
        rest = value.magnitude
        for position in stride(from: index + digits - 1, through: index, by: -1) {
            buffer[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        index += digits
    }

    private static func parts(_ date: Date, utc: Bool) -> (tm, Int) {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(totalMillis / 1000)
        var millis = Int(totalMillis % 1000)
        if millis < 0 { millis += 1000; seconds -= 1 }
        var result = tm()
        if utc { gmtime_r(&seconds, &result) } else { localtime_r(&seconds, &result) }
        return (result, millis)
    }
}
