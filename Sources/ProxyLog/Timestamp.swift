import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Date formats of the logs, without a formatter object (thread-safe, allocation-light).
enum Timestamp {
    /// `2025-01-31T12:34:56.789Z` (UTC, milliseconds), as JSONL `start` and HAR `startedDateTime`.
    static func iso8601(_ date: Date) -> String {
        let (tm, millis) = parts(date, utc: true)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(tm.tm_year) + 1900, Int(tm.tm_mon) + 1,
                      Int(tm.tm_mday), Int(tm.tm_hour), Int(tm.tm_min), Int(tm.tm_sec), millis)
    }

    /// `12:34:56.789` in local time (or UTC), as the console line starts.
    static func clock(_ date: Date, utc: Bool = false) -> String {
        let (tm, millis) = parts(date, utc: utc)
        return String(format: "%02d:%02d:%02d.%03d", Int(tm.tm_hour), Int(tm.tm_min), Int(tm.tm_sec), millis)
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
