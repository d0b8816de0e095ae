/// Parses the size and time values the command line accepts: `65536`, `64KiB`, `16MiB`, `1GiB`, `64KB`;
/// `60`, `60s`, `500ms`, `2m`.
public enum UnitParser {
    public static func bytes(_ text: String) -> Int? {
        let trimmed = text.trimmingSpaces()
        let digits = trimmed.prefix { $0.isNumber }
        guard let number = Int(digits), number >= 0 else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingSpaces().lowercased()
        let multiplier: Int
        switch unit {
        case "", "b": multiplier = 1
        case "k", "kb", "kib": multiplier = 1024
        case "m", "mb", "mib": multiplier = 1024 * 1024
        case "g", "gb", "gib": multiplier = 1024 * 1024 * 1024
        default: return nil
        }
        let (value, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : value
    }

    /// The longest duration accepted, 100 years: longer ones would overflow `Int` (it trapped) or NIO's nanosecond
    /// clock (~292 years).
    public static let maxMilliseconds = 100 * 365 * 86_400_000

    /// A duration in milliseconds; nil when it is not one, or over `maxMilliseconds`.
    public static func milliseconds(_ text: String) -> Int? {
        let trimmed = text.trimmingSpaces()
        let numberPart = trimmed.prefix { $0.isNumber || $0 == "." }
        guard let number = Double(numberPart), number >= 0 else { return nil }
        let unit = trimmed.dropFirst(numberPart.count).trimmingSpaces().lowercased()
        let factor: Double
        switch unit {
        case "", "s", "sec": factor = 1000
        case "ms": factor = 1
        case "m", "min": factor = 60_000
        default: return nil
        }
        let milliseconds = number * factor
        guard milliseconds <= Double(maxMilliseconds) else { return nil }
        return Int(milliseconds)
    }
}
