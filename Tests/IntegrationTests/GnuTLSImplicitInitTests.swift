import Foundation
import ProxyTestSupport
import Testing

/// hookproxy starts itself once more with `GNUTLS_NO_IMPLICIT_INIT` set, so that GnuTLS (which Debian's libcurl
/// pulls in through libldap and librtmp, and which hookproxy never calls) skips its load-time initialization and the
/// resident pages it costs (issue 14: idle RSS).
@Suite(.timeLimit(.minutes(2)))
struct GnuTLSImplicitInitTests {
    /// The environment the running image was started with (`/proc/PID/environ`), by name.
    private static func startEnvironment(_ pid: Int32) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return [:] }
        var result: [String: String] = [:]
        for entry in data.split(separator: 0) {
            let text = String(decoding: entry, as: UTF8.self)
            guard let equals = text.firstIndex(of: "=") else { continue }
            result[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return result
    }

    /// Resident KiB of the process's mappings of GnuTLS (nil when it has none: a libcurl without it).
    private static func gnutlsResidentKiB(_ pid: Int32) -> Int? {
        guard let smaps = try? String(contentsOfFile: "/proc/\(pid)/smaps", encoding: .utf8) else { return nil }
        var inGnuTLS = false
        var total: Int?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
                inGnuTLS = fields.last?.contains("libgnutls") == true
            } else if inGnuTLS, fields.first == "Rss:", fields.count >= 2, let kib = Int(fields[1]) {
                total = (total ?? 0) + kib
            }
        }
        return total
    }

    @Test func theProxyRunsAsItsSecondImageWithGnuTLSLeftUninitialized() async throws {
        let origin = try await TestOrigin.start()
        let directory = try TemporaryDirectory()
        let arguments = ["run", "--listen", "127.0.0.1:0", "--no-ui", "--quiet"]
        // As a user starts it: it executes itself again (same process), the marker in the second image's start.
        let lean = try await HookproxyProcess.with(arguments, directory: directory) { child in
            let response = try await child.curl("\(origin.baseURL)/bytes/100")
            #expect(response.status == 200)
            let environment = Self.startEnvironment(child.process.processIdentifier)
            #expect(environment["GNUTLS_NO_IMPLICIT_INIT"] == "1")
            #expect(environment["HOOKPROXY_SKIPPED_GNUTLS_INIT"] == "1")
            return Self.gnutlsResidentKiB(child.process.processIdentifier)
        }
        // The user's own setting is left alone: no second start, and "0" keeps GnuTLS's initialization.
        let full = try await HookproxyProcess.with(arguments, environment: ["GNUTLS_NO_IMPLICIT_INIT": "0"],
                                                   directory: directory) { child in
            let response = try await child.curl("\(origin.baseURL)/bytes/100")
            #expect(response.status == 200)
            let environment = Self.startEnvironment(child.process.processIdentifier)
            #expect(environment["GNUTLS_NO_IMPLICIT_INIT"] == "0")
            #expect(environment["HOOKPROXY_SKIPPED_GNUTLS_INIT"] == nil)
            return Self.gnutlsResidentKiB(child.process.processIdentifier)
        }
        if let lean, let full {
            #expect(lean < full, "GnuTLS resident: \(lean) KiB skipped, \(full) KiB initialized")
        }
        try await origin.shutdown()
    }

    /// Started through the loader (`ld.so hookproxy …`), `/proc/self/exe` is the loader: hookproxy must not execute
    /// that with its own arguments (a review's find: `ld.so check` failed with "cannot open shared object file", and
    /// `--help` printed the loader's usage), and goes on as it is.
    @Test func startedThroughTheLoaderItRunsAsItIs() async throws {
        let loaders = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        guard let loader = loaders.first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
              let binary = HookproxyProcess.executable else { return }
        let version = try await Hooks.run(loader, [binary, "--version"])
        #expect(version.exitCode == 0 && version.stdout.hasPrefix("hookproxy "), "\(version)")
        let directory = try TemporaryDirectory()
        try directory.write("rules:\n  - name: one\n    match: { host: a.test }\n    respond: { body: x }\n", to: "rules/one.yaml")
        let check = try await Hooks.run(loader, [binary, "check", "--rules", directory.path + "/rules"])
        #expect(check.exitCode == 0 && check.stdout.contains("ok: 1 rule"), "\(check)")
    }
}
