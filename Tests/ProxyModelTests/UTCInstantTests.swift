import Foundation
import ProxyModel
import Testing

/// `UTCInstant`, the clock of `trust.verify_time` / `--verify-time`: what it reads, what it refuses, how it prints.
@Suite struct UTCInstantTests {
    @Test("RFC 3339 UTC instants read to the same seconds Foundation computes, and print back", arguments: [
        "1970-01-01T00:00:00Z", "2000-02-29T12:34:56Z", "2031-01-01T00:00:00Z", "2100-03-01T23:59:59Z",
        "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z",
    ])
    func roundTrip(text: String) throws {
        let instant = try UTCInstant(parsing: text)
        let formatter = ISO8601DateFormatter()
        let expected = try #require(formatter.date(from: text))
        #expect(instant.secondsSince1970 == Int64(expected.timeIntervalSince1970))
        #expect(instant.description == text)
    }

    @Test("lower-case t and z, +00:00 and a fraction of a second are the same instant")
    func variants() throws {
        let plain = try UTCInstant(parsing: "2031-01-01T00:00:00Z")
        for text in ["2031-01-01t00:00:00z", "2031-01-01T00:00:00+00:00", "2031-01-01T00:00:00.999Z"] {
            #expect(try UTCInstant(parsing: text) == plain, "\(text)")
        }
    }

    @Test("anything else is refused with the problem and the form to write", arguments: [
        ("", "expected a date YYYY-MM-DD"),
        ("2031-01-01", "expected 'T' and a time after the date"),
        ("2031-01-01 00:00:00Z", "expected 'T'"),
        ("2031-01-01T00:00Z", "expected a time HH:MM:SS"),
        ("2031-01-01T00:00:00", "no time zone: end it with Z for UTC"),
        ("2031-01-01T00:00:00+02:00", "time zone '+02:00' is not UTC"),
        ("2031-01-01T00:00:00Zjunk", "unexpected 'junk' after the Z"),
        ("2031-01-01T00:00:00.Z", "expected digits after '.'"),
        ("2031-13-01T00:00:00Z", "month 13 does not exist"),
        ("2031-02-29T00:00:00Z", "day 29 does not exist in month 2 of 2031"),
        ("2031-01-01T24:00:00Z", "is not a time of day"),
        ("2031-01-01T00:00:60Z", "is not a time of day"),
        ("next tuesday", "expected a date"),
    ])
    func refused(text: String, problem: String) {
        #expect {
            try UTCInstant(parsing: text)
        } throws: { error in
            let message = "\(error)"
            return message.contains(problem) && message.hasPrefix("'\(text)' is not a UTC instant")
                && message.hasSuffix("write RFC 3339 in UTC, e.g. 2031-01-01T00:00:00Z")
        }
    }
}
