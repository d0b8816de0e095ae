import Foundation
import ProxyModel

/// Many different FlowRecords from a fixed seed, for holding `JSONWriter` to `JSONEncoder`: every string field drawn
/// from text JSON must escape (quotes, backslashes, slashes, controls, non-ASCII, long), optional fields present and
/// absent, timings in milliseconds with microsecond precision as curl's are made, bodies as text, base64 and
/// truncated, cookies with every attribute, hook events of every hook, redirect hops, very large numbers.
enum VariedFlows {
    /// SplitMix64: the same records on every run and platform.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let pieces: [String] = [
        "", "plain", "quote \" inside", #"back\slash \\ two"#, "a/b//c </script>", "tab\tnew\nline\rcr",
        "\u{0}\u{1}\u{7}\u{8}\u{b}\u{c}\u{e}\u{1b}[31m\u{1f}\u{7f}", "é→😀", "\u{2028}\u{2029}\u{85}\u{a0}",
        "<redacted>", "\u{FEFF}bom", "e\u{301} combining", "日本語テキスト", #"\u0041 not an escape"#,
        " spaced  ", "🏳️‍🌈 zwj", "\u{10FFFF}\u{E000}\u{FFFD}", "{\"json\":[1,2.5,null]}", "Ω≈ç√∫",
        String(repeating: "long text 0123456789/", count: 300),
    ]

    static func text(_ g: inout Generator) -> String {
        switch Int.random(in: 0..<10, using: &g) {
        case 0: return ""
        case 1: // arbitrary scalars, every plane
            let ranges: [ClosedRange<UInt32>] = [0...0x7F, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x10000...0x10FFFF]
            return String(String.UnicodeScalarView((0..<Int.random(in: 1...40, using: &g)).map { _ in
                Unicode.Scalar(UInt32.random(in: ranges.randomElement(using: &g)!, using: &g))!
            }))
        default:
            return (0..<Int.random(in: 1...3, using: &g)).map { _ in pieces.randomElement(using: &g)! }.joined()
        }
    }

    static func maybe<T>(_ g: inout Generator, _ make: (inout Generator) -> T) -> T? {
        Bool.random(using: &g) ? make(&g) : nil
    }

    /// Milliseconds as curl's timings are made (microseconds / 1000, some of them differences), or nil.
    static func millis(_ g: inout Generator) -> Double? {
        switch Int.random(in: 0..<6, using: &g) {
        case 0: return nil
        case 1: return Double(Int.random(in: 1...100_000_000_000, using: &g)) / 1000
        case 2: return Double(Int.random(in: 1...5000, using: &g)) / 1000 - Double(Int.random(in: 1...3000, using: &g)) / 1000
        case 3: return [0.1 + 0.2, 1e-05, 0.001, 1e16, 3, 12.5, 2.25, 1e-7].randomElement(using: &g)!
        default: return Double(Int.random(in: 1...2_000_000, using: &g)) / 1000
        }
    }

    static func headers(_ g: inout Generator, response: Bool) -> HeaderFields {
        var fields = HeaderFields()
        let contentTypes = ["text/plain; charset=utf-8", "application/json", "image/png", "application/octet-stream", ";", ""]
        if Bool.random(using: &g) { fields.add("Content-Type", contentTypes.randomElement(using: &g)!) }
        if Int.random(in: 0..<4, using: &g) == 0 { fields.add("Content-Encoding", "gzip") }
        if response {
            if Bool.random(using: &g) {
                fields.add("Set-Cookie", "sid=\(text(&g)); Path=/\(text(&g)); Domain=example.com; HttpOnly; Secure")
            }
            if Bool.random(using: &g) { fields.add("Set-Cookie", "theme=\(text(&g))") }
            if Bool.random(using: &g) { fields.add("Location", "https://next.example.com/\(text(&g))") }
        } else {
            if Bool.random(using: &g) { fields.add("Cookie", "a=1; b=\(text(&g)); =empty;c") }
            if Bool.random(using: &g) { fields.add("Authorization", "Bearer \(text(&g))") }
        }
        for _ in 0..<Int.random(in: 0...4, using: &g) { fields.add("X-\(text(&g))", text(&g)) }
        return fields
    }

    static func body(_ g: inout Generator) -> CapturedBody? {
        switch Int.random(in: 0..<5, using: &g) {
        case 0: return nil
        case 1: return CapturedBody(bytes: (0..<Int.random(in: 0...300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        case 2: return CapturedBody(bytes: Array(text(&g).utf8).dropLast(Int.random(in: 0...2, using: &g)).map { $0 }, truncated: true)
        default: return CapturedBody(bytes: Array(text(&g).utf8))
        }
    }

    static func flow(_ index: Int, _ g: inout Generator) -> FlowRecord {
        let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "M\u{e9}THOD"]
        let query = Bool.random(using: &g) ? "?token=\(text(&g))&&page=2&flag&=v&x=a=b#frag" : ""
        let url = "http://api.example.com/\(text(&g))\(query)"
        let hooks: [HookEvent.Hook] = [.rule, .redirect, .challenge, .trust, .intercept, .body, .upstream]
        let events = (0..<Int.random(in: 0...3, using: &g)).map { _ in
            let hook = hooks.randomElement(using: &g)!
            let chain = hook == .trust && Bool.random(using: &g) ? (0..<Int.random(in: 0...3, using: &g)).map { _ in
                CertificateSummary(subject: text(&g), issuer: text(&g), notAfter: text(&g), pin: "sha256//" + text(&g))
            } : nil
            return HookEvent(hook: hook, action: text(&g), detail: text(&g), chain: chain)
        }
        let requestBody = body(&g), responseBody = body(&g)
        let huge = Int.random(in: 0..<8, using: &g) == 0
        let response: ResponseHead? = Int.random(in: 0..<5, using: &g) == 0 ? nil : ResponseHead(
            status: [200, 201, 204, 301, 302, 304, 401, 404, 500, 999].randomElement(using: &g)!,
            reason: maybe(&g, text), version: Bool.random(using: &g) ? .http1_1 : HTTPVersionNumber(major: 1, minor: 0),
            headers: headers(&g, response: true))
        return FlowRecord(
            id: huge ? Int.max - index : index,
            start: Date(timeIntervalSince1970: Double(Int.random(in: 0...4_000_000_000_000, using: &g)) / 1000),
            client: Bool.random(using: &g) ? "127.0.0.1:\(Int.random(in: 1...65535, using: &g))" : "[::1]:\(text(&g))",
            request: RequestHead(method: methods.randomElement(using: &g)!, url: ProxyURL(string: "http://api.example.com/x")!,
                                 headers: headers(&g, response: false)),
            url: url, upstreamURL: maybe(&g) { _ in "http://127.0.0.1:9000/\(url)" }, response: response,
            requestBodySize: huge ? Int.max : (requestBody?.bytes.count ?? 0) + Int.random(in: 0...2, using: &g) * 1000,
            responseBodySize: huge ? Int(Int32.max) * 4 : (responseBody?.bytes.count ?? 0),
            requestBody: requestBody, responseBody: responseBody,
            timings: Timings(dns: millis(&g), connect: millis(&g), tls: millis(&g), firstByte: millis(&g), total: millis(&g)),
            durationMs: Double(Int.random(in: 0...100_000_000, using: &g)) / 1000 + 0.000_000_1,
            rules: (0..<Int.random(in: 0...3, using: &g)).map { _ in text(&g) }, events: events,
            error: maybe(&g, text), hop: Int.random(in: 0...3, using: &g),
            serverIP: maybe(&g) { _ in "10.0.0.1" }, connectionID: maybe(&g) { g in String(Int.random(in: 0...1000, using: &g)) },
            secretValues: Bool.random(using: &g) ? ["1", text(&g)] : [],
            responseTrailers: maybe(&g) { g in headers(&g, response: true) })
    }

    static func all(count: Int, seed: UInt64 = 14) -> [FlowRecord] {
        var generator = Generator(state: seed)
        return (0..<count).map { flow($0, &generator) }
    }
}
