import Foundation
@testable import ProxyRules
import Testing

/// `YAMLTag.resolve(plain:)` is Yams' default resolver written out by hand. These tests hold it to Yams' own
/// patterns (copied from Yams 6.2.2 `Resolver.swift`, run by NSRegularExpression as Yams ran them), over every
/// short string of the characters the patterns care about and over longer shapes of each kind.
@Suite struct YAMLTagResolveTests {
    /// Yams' `Resolver.default`, in its order: the first rule whose pattern matches wins; `!!str` otherwise.
    static let yamsPatterns: [(YAMLTag, String)] = [
        (.bool, #"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"#),
        (.int, #"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"#),
        (.float, #"^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"#),
        (.merge, #"^(?:<<)$"#),
        (.null, #"^(?:~|null|Null|NULL|)$"#),
        (.timestamp, #"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"#),
        (.value, #"^(?:=)$"#),
    ]
    static let yamsRules = yamsPatterns.map { ($0.0, try! NSRegularExpression(pattern: $0.1)) }

    static func yams(_ text: String) -> YAMLTag {
        let range = NSRange(location: 0, length: text.utf16.count)
        return yamsRules.first { $0.1.firstMatch(in: text, range: range) != nil }?.0 ?? .str
    }

    /// Every string of up to `length` characters from `alphabet`.
    static func all(_ alphabet: [String], upTo length: Int) -> [String] {
        var result = [""]
        var level = [""]
        for _ in 0..<length {
            level = level.flatMap { prefix in alphabet.map { prefix + $0 } }
            result += level
        }
        return result
    }

    @Test func shortStringsResolveAsYamsResolvedThem() {
        let alphabet = ["0", "1", "6", "9", "_", "-", "+", ".", ":", "e", "x", "o", "b", "a"]
        var mismatches: [String] = []
        for text in Self.all(alphabet, upTo: 4) where YAMLTag.resolve(plain: text) != Self.yams(text) {
            mismatches.append("\(text): \(YAMLTag.resolve(plain: text)) vs Yams \(Self.yams(text))")
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(20))")
    }

    /// (Not "1\n": ICU's `$` also matches before a final line break, but a plain scalar never ends in one.)
    @Test func longerShapesResolveAsYamsResolvedThem() {
        let words = ["yes", "Yes", "YES", "yEs", "no", "NO", "nO", "true", "True", "TRUE", "tRue", "false", "FALSE",
                     "on", "On", "ON", "oN", "off", "Off", "OFF", "y", "n", "~", "null", "Null", "NULL", "nULL", "<<",
                     "<", "<<<", "=", "==", "", " ", ".inf", "-.inf", "+.Inf", ".INF", ".nan", ".NaN", "-.nan", ".NAN",
                     ".Nan", "0b1010", "-0b1_0", "0b", "0b2", "0o17", "0o", "0o8", "017", "0_7", "-0", "+0", "08",
                     "0x1F", "0xg", "0x", "-0x_f", "1_000", "1__", "190:20:30", "1:60", "1:59", "1:5:9", "1:", ":1",
                     "0:30", "1:30.5", "-1:30.", "1:300", "1e3", "1E+3", "1e", "1.e3", ".5", "._5", ".5e3", ".5e+3",
                     "1.5e-3", "1.", "-.5", "+1_0.0_1", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
                     "2001-12-14 21:59:43.10 -5", "2001-12-14T21:59:43Z", "2001-12-14  21:59:43.10Z", "2001-1-4 1:59:43",
                     "2001-12-14T21:59:43+05:3", "2001-12-14T21:59:43 +05:30", "2001-12-14T21:59:43\t-05",
                     "2001-12-14T21:59:43 Z", "2001-12-14T21:59:43.", "2001-12-14T21:59", "2001-123-14",
                     "20011-12-14", "2001-12-1", "2001-12-14T", "2001-12-14 ", "caf\u{E9}", "\u{661}", "١٢", "1 2", "yes "]
        var mismatches: [String] = []
        for text in words where YAMLTag.resolve(plain: text) != Self.yams(text) {
            mismatches.append("\(text.debugDescription): \(YAMLTag.resolve(plain: text)) vs Yams \(Self.yams(text))")
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test func timestampShapesResolveAsYamsResolvedThem() {
        let parts = ["2001-12-14", "2001-1-4", "2001-12-14T1:02:03", "2001-12-14 \t01:02:03", "2001-12-14t01:02:03.5"]
        let zones = ["", "Z", " Z", "+5", "-05", "-05:30", "+05:3", " \t-1", "Z1", "+123", "+"]
        var mismatches: [String] = []
        for part in parts {
            for zone in zones {
                let text = part + zone
                if YAMLTag.resolve(plain: text) != Self.yams(text) {
                    mismatches.append("\(text): \(YAMLTag.resolve(plain: text)) vs Yams \(Self.yams(text))")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }
}
