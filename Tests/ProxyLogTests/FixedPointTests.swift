import Foundation
import Testing
@testable import ProxyLog

/// `FixedPoint` is `String(format: "%.Nf")` without Foundation: pinned digit for digit against it (glibc's
/// rounding of the exact binary value, half to even), over the console's sizes and durations and random doubles.
struct FixedPointTests {
    static let specials: [Double] = [
        0, 0.5, 1.5, 2.5, 0.4, 1.25, 0.15, 0.05, 0.005, 0.125, 0.375, 999.5, 999.4999, 1023.95, 1023.949999,
        123_456_789.125, 1e20, 1e300, .greatestFiniteMagnitude, .leastNonzeroMagnitude, .leastNormalMagnitude,
        .nan, .infinity,
    ]

    @Test("special values, both signs, 0 to 3 decimals")
    func specialValues() {
        for value in Self.specials {
            for decimals in 0...3 {
                for signed in [value, -value] {
                    #expect(FixedPoint.text(signed, decimals: decimals) == String(format: "%.\(decimals)f", signed),
                            "\(signed) with \(decimals) decimals")
                }
            }
        }
    }

    @Test("random doubles, durations and byte sizes")
    func randomValues() {
        var generator = SystemRandomNumberGenerator()
        var differing: [String] = []
        for _ in 0..<20_000 {
            let decimals = Int.random(in: 0...3)
            let values = [Double(bitPattern: generator.next()), Double.random(in: 0...5_000),
                          Double(Int.random(in: 0...100_000)) / 8, Double(Int.random(in: 1024...Int.max)) / 1024]
            for value in values where FixedPoint.text(value, decimals: decimals) != String(format: "%.\(decimals)f", value) {
                differing.append("\(value) (\(decimals))")
            }
        }
        #expect(differing.isEmpty, "\(differing.prefix(10))")
    }

    @Test("humanSize and humanDuration as String(format:) wrote them")
    func consoleUnits() {
        for bytes in [1024, 1075, 1126, 1228, 1229, 1_048_524, 1_048_576, 5_767_168, 1_073_741_823, 3 << 30, 1 << 50, Int.max] {
            var value = Double(bytes) / 1024
            var expected = ""
            for unit in ["KiB", "MiB", "GiB"] {
                if value < 1024 || unit == "GiB" { expected = String(format: "%.1f %@", value, unit); break }
                value /= 1024
            }
            #expect(ConsoleLog.humanSize(bytes) == expected, "\(bytes)")
        }
        for ms in [0, 0.4, 0.5, 1.5, 2.5, 999.4, 999.5, 999.9999, 1000, 1234.5, 1005, 61_000, 86_400_000.123, -3] {
            let expected = ms < 1000 ? String(format: "%.0f ms", ms) : String(format: "%.2f s", ms / 1000)
            #expect(ConsoleLog.humanDuration(ms) == expected, "\(ms)")
        }
    }
}
