// URLs, URL templates and globs. Input: line 1 is a pattern/template, line 2 a URL or text, further lines are
// `path_regex` groups ($1, $2…). Every parser sees every line, and the whole input is also parsed as one URL.
// Oracle besides "no crash": `Glob` must agree with a straightforward reference matcher (dynamic programming over
// the same elements), case-sensitive and case-insensitive.
import FuzzSupport
import ProxyModel
@testable import ProxyRules

let fallbackURL = ProxyURL(string: "https://api.example.test:8443/v1/users/42?page=2")!

func exerciseURL(_ text: String) -> ProxyURL? {
    _ = ProxyURL.splitAuthority(Substring(text), defaultPort: 80)
    _ = ProxyURL.splitTarget(Substring(text))
    _ = ProxyURL.defaultPort(for: text)
    guard let url = ProxyURL(string: text) else { return nil }
    _ = (url.description, url.authority, url.origin, url.pathAndQuery, url.isDefaultPort)
    _ = ProxyURL(string: url.description)
    _ = RuleMatcher.queryPairs(url.query)
    return url
}

/// The reference: does `pattern` (bytes, `*` any run, `?` one UTF-8 scalar) match all of `text`?
func referenceGlob(_ pattern: String, _ text: String, caseInsensitive: Bool) -> Bool {
    func lower(_ b: UInt8) -> UInt8 { (b >= 65 && b <= 90) ? b + 32 : b }
    let p = Array(pattern.utf8), t = Array(text.utf8)
    // scalar boundaries of the text: `?` may only step from one to the next
    var nextScalar = [Int](repeating: 0, count: t.count + 1)
    for i in 0..<t.count {
        var j = i + 1
        while j < t.count, t[j] & 0xC0 == 0x80 { j += 1 }
        nextScalar[i] = j
    }
    // can[i * width + j]: p[i...] matches t[j...]
    let width = t.count + 1
    var can = [Bool](repeating: false, count: (p.count + 1) * width)
    can[p.count * width + t.count] = true
    for i in stride(from: p.count - 1, through: 0, by: -1) {
        let row = i * width, next = (i + 1) * width
        for j in stride(from: t.count, through: 0, by: -1) {
            switch p[i] {
            case UInt8(ascii: "*"):
                can[row + j] = can[next + j] || (j < t.count && can[row + j + 1])
            case UInt8(ascii: "?"):
                can[row + j] = j < t.count && can[next + nextScalar[j]]
            default:
                let a = caseInsensitive ? lower(p[i]) : p[i]
                let b = j < t.count ? (caseInsensitive ? lower(t[j]) : t[j]) : 0
                can[row + j] = j < t.count && a == b && can[next + j + 1]
            }
        }
    }
    return can[0]
}

func exerciseGlob(_ pattern: String, _ text: String) {
    for caseInsensitive in [false, true] {
        guard case .success(let glob) = Glob.compile(pattern, caseInsensitive: caseInsensitive) else { continue }
        let got = glob.matches(text)
        if (pattern.utf8.count + 1) * (text.utf8.count + 1) <= 20_000 {
            let want = referenceGlob(pattern, text, caseInsensitive: caseInsensitive)
            if got != want {
                fuzzFail("Glob(\(String(reflecting: pattern)), caseInsensitive: \(caseInsensitive)).matches(\(String(reflecting: text))) = \(got), reference says \(want)")
            }
        }
    }
    if let host = HostGlob(pattern) { _ = host.matches(text) }
}

func exerciseTemplate(_ source: String, url: ProxyURL, groups: [String]) {
    guard case .success(let template) = URLTemplate.parse(source) else { return }
    _ = (template.maxGroup, template.isLiteral)
    let rendered = template.render(url: url, groups: groups)
    _ = MapRemote.hasNoPath(rendered)
    if let mapped = MapRemote(to: template).target(for: url, groups: groups) { _ = mapped.description }
    _ = RedirectClient(status: 302, location: template).response(for: url, groups: groups)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let whole = String(decoding: input.bytes, as: UTF8.self)
    let first = input.string()
    let second = input.string()
    var groups: [String] = []
    while !input.isEmpty, groups.count < 8 { groups.append(input.string()) }

    _ = exerciseURL(whole)
    _ = exerciseURL(first)
    let url = exerciseURL(second) ?? fallbackURL
    exerciseGlob(first, second)
    exerciseTemplate(first, url: url, groups: [url.path] + groups)
    exerciseTemplate(whole, url: fallbackURL, groups: [fallbackURL.path] + groups)
    _ = RuleMatcher.percentDecoded(Substring(second))
    return 0
}

@_cdecl("fuzz_url_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv) { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
}
