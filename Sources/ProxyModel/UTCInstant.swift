/// A UTC instant to the second, read and written as RFC 3339 (`2031-01-01T00:00:00Z`): the fixed clock that
/// `trust.verify_time` and `--verify-time` check certificate dates at, and how those dates are shown.
public struct UTCInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Seconds since 1970-01-01T00:00:00Z (what OpenSSL's `time_t` holds).
    public var secondsSince1970: Int64

    public init(secondsSince1970: Int64) {
        self.secondsSince1970 = secondsSince1970
    }

    /// Why a text is not an instant, in words that say what to write instead.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var text: String
        public var problem: String

        public var description: String {
            "'\(text)' is not a UTC instant (\(problem)); write RFC 3339 in UTC, e.g. 2031-01-01T00:00:00Z"
        }
    }

    /// Reads `YYYY-MM-DDTHH:MM:SSZ`. `t`/`z` may be lower case, `+00:00` may stand for `Z`, and a fraction of a
    /// second (`.5`) is accepted and dropped. Any other offset is refused rather than converted, so a rule says
    /// plainly which instant it means.
    public init(parsing text: String) throws(ParseError) {
        func fail(_ problem: String) -> ParseError { ParseError(text: text, problem: problem) }
        let chars = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= chars.count else { return nil }
            var value = 0
            for index in range {
                guard chars[index] >= 0x30, chars[index] <= 0x39 else { return nil }
                value = value * 10 + Int(chars[index] - 0x30)
            }
            return value
        }
        func char(_ index: Int, _ allowed: String) -> Bool {
            index < chars.count && allowed.utf8.contains(chars[index])
        }
        guard let year = number(0..<4), char(4, "-"), let month = number(5..<7), char(7, "-"),
              let day = number(8..<10)
        else { throw fail("expected a date YYYY-MM-DD") }
        guard char(10, "Tt") else { throw fail("expected 'T' and a time after the date") }
        guard let hour = number(11..<13), char(13, ":"), let minute = number(14..<16), char(16, ":"),
              let second = number(17..<19)
        else { throw fail("expected a time HH:MM:SS") }
        var index = 19
        if char(index, ".") {
            index += 1
            let start = index
            while char(index, "0123456789") { index += 1 }
            if index == start { throw fail("expected digits after '.'") }
        }
        let zone = String(decoding: chars[index...], as: UTF8.self)
        switch zone {
        case "Z", "z", "+00:00": break
        case "": throw fail("no time zone: end it with Z for UTC")
        case let rest where rest.hasPrefix("Z") || rest.hasPrefix("z"):
            throw fail("unexpected '\(rest.dropFirst())' after the Z")
        default: throw fail("time zone '\(zone)' is not UTC: convert the time to UTC and end it with Z")
        }
        guard (1...12).contains(month) else { throw fail("month \(month) does not exist") }
        guard (1...UTCInstant.daysIn(month: month, year: year)).contains(day) else {
            throw fail("day \(day) does not exist in month \(month) of \(year)")
        }
        guard hour < 24, minute < 60, second < 60 else { throw fail("\(hour):\(minute):\(second) is not a time of day") }
        let days = UTCInstant.daysSince1970(year: year, month: month, day: day)
        secondsSince1970 = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// `2031-01-01T00:00:00Z`.
    public var description: String {
        let days = secondsSince1970 >= 0 ? secondsSince1970 / 86_400 : (secondsSince1970 - 86_399) / 86_400
        let seconds = Int(secondsSince1970 - days * 86_400)
        let (year, month, day) = UTCInstant.civil(daysSince1970: days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var yearText = "\(year)"
        while yearText.count < 4 { yearText = "0" + yearText }
        return "\(yearText)-\(two(month))-\(two(day))T\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60))Z"
    }

    public static func < (a: UTCInstant, b: UTCInstant) -> Bool { a.secondsSince1970 < b.secondsSince1970 }

    // MARK: the proleptic Gregorian calendar (Howard Hinnant's days-from-civil and back)

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = Int64((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(daysSince1970 days: Int64) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        let month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        let year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
