import Foundation

/// `--proxy-auth`: checks a `Proxy-Authorization: Basic …` value against the configured credentials.
enum ProxyAuth {
    static func matches(_ header: String, _ credentials: ProxyCredentials) -> Bool {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
              let decoded = String(data: data, encoding: .utf8)
        else { return false }
        return decoded == "\(credentials.user):\(credentials.password)"
    }
}
