import Foundation
import Testing
@testable import ProxyLog

/// `Timestamp` writes what `String(format:)` wrote before it, for any date the logs can see and beyond.
@Suite struct TimestampTests {
    static func formatted(_ date: Date, utc: Bool) -> (iso: String, clock: String) {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(totalMillis / 1000)
        var millis = Int(totalMillis % 1000)
        if millis < 0 { millis += 1000; seconds -= 1 }
        var tm = tm()
        if utc { gmtime_r(&seconds, &tm) } else { localtime_r(&seconds, &tm) }
        let iso = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(tm.tm_year) + 1900, Int(tm.tm_mon) + 1,
                         Int(tm.tm_mday), Int(tm.tm_hour), Int(tm.tm_min), Int(tm.tm_sec), millis)
        let clock = String(format: "%02d:%02d:%02d.%03d", Int(tm.tm_hour), Int(tm.tm_min), Int(tm.tm_sec), millis)
        return (iso, clock)
    }

    @Test func matchesStringFormat() {
        var generator = VariedFlows.Generator(state: 3)
        var seconds: [Double] = [0, -0.0004, -0.0005, -1, 0.9995, 1_700_000_000.123, 951_782_400, 4_102_444_800,
                                 253_402_300_799.999, 253_402_300_800, -62_135_596_800, -62_135_596_801, -62_320_000_000, -70_000_000_000]
        seconds += (0..<3000).map { _ in Double(Int.random(in: -4_000_000_000_000...4_000_000_000_000, using: &generator)) / 1000 }
        for value in seconds {
            let date = Date(timeIntervalSince1970: value)
            let utc = Self.formatted(date, utc: true), local = Self.formatted(date, utc: false)
            #expect(Timestamp.iso8601(date) == utc.iso, "\(value)")
            #expect(Timestamp.clock(date, utc: true) == utc.clock, "\(value)")
            #expect(Timestamp.clock(date) == local.clock, "\(value)")
        }
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 1_700_000_000.123)) == "2023-11-14T22:13:20.123Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -62_320_000_000)).hasPrefix("-005-"))
    }
}
