import FoundationEssentials
import Glibc
import ProxyModel

/// `--proxy-auth`: checks a `Proxy-Authorization: Basic …` value against the configured credentials.
enum ProxyAuth {
    static func matches(_ header: String, _ credentials: ProxyCredentials) -> Bool {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let data = Data(base64Encoded: String(parts[1]).trimmingWhitespace())
        else { return false }
        return constantTimeEquals(Array(data), Array("\(credentials.user):\(credentials.password)".utf8))
    }

    /// Compares every byte whatever the first difference, so the time taken does not tell how much of a guess
    /// was right. Only the length of `expected` leaks (the loop runs over it), never its content.
    static func constantTimeEquals(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: given.count ^ expected.count)
        if given.count != expected.count { difference |= 1 }
        for index in expected.indices {
            let other = index < given.count ? given[index] : ~expected[index]
            difference |= other ^ expected[index]
        }
        return difference == 0
    }
}
