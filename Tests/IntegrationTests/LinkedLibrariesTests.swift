import Foundation
import Testing

/// Issue 14 item 5: the modules the binary links use FoundationEssentials at most, so Foundation and its ICU data
/// are never mapped (about 5–7 MiB of idle RSS). One `import Foundation` in any of them brings all three libraries
/// back. (The release binary's `readelf -d` is the real check, see bench/README.md; debug builds autolink Foundation
/// whatever the sources import, so the test binary cannot tell.) ProxyTestSupport is linked only into tests.
@Suite struct LinkedLibrariesTests {
    static func importsFoundation(_ line: Substring) -> Bool {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let importAt = words.firstIndex(of: "import"),
              words[..<importAt].allSatisfy({ $0.hasPrefix("@") || ["internal", "public", "package", "private",
                                                                      "fileprivate"].contains($0) }) else { return false }
        return words[(importAt + 1)...].contains { $0 == "Foundation" || $0.hasPrefix("Foundation.") }
    }

    @Test("no module the binary links imports Foundation")
    func noFoundationImport() throws {
        let sources = URL(fileURLWithPath: Hooks.repositoryRoot).appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && !$0.hasPrefix("ProxyTestSupport/") }
        #expect(files.count > 100)
        for file in files {
            let text = try String(contentsOfFile: sources.appendingPathComponent(file).path, encoding: .utf8)
            for line in text.split(separator: "\n") where Self.importsFoundation(line) {
                Issue.record("Sources/\(file): \(line) (use FoundationEssentials, or nothing)")
            }
        }
        #expect(Self.importsFoundation("import Foundation") && Self.importsFoundation("@preconcurrency import Foundation")
                && Self.importsFoundation("import struct Foundation.Data") && !Self.importsFoundation("import FoundationEssentials"))
    }
}
