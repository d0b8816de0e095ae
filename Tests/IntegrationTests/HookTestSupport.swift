import Foundation
import ProxyModel
import ProxyRules
import ProxyServer
import ProxyTestSupport
import Testing

// Helpers shared by the issue-4 hook tests (trust, on_redirect, on_challenge, pin). Real sockets only: a TestOrigin
// on 127.0.0.1:0, hookproxy in-process on 127.0.0.1:0, the real curl binary as the client.

/// A response as `curl -i` printed it (informational heads skipped).
struct CurlResponse {
    var exitCode: Int32
    var timedOut: Bool
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    var stderr: String

    var bodyText: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Parses `curl -i` output: one or more heads (1xx first), then the body.
    init(_ result: CurlCLI.Result) {
        exitCode = result.exitCode
        timedOut = result.timedOut
        stderr = result.stderr
        status = 0
        headers = []
        var rest = result.stdout[...]
        while true {
            guard let end = CurlResponse.find([13, 10, 13, 10], in: rest) else {
                body = Array(rest)
                return
            }
            let head = String(decoding: rest[rest.startIndex..<end], as: UTF8.self)
            rest = rest[(end + 4)...]
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
            headers = lines.compactMap { line in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            if !(100..<200).contains(status) || status == 101 { break }
        }
        body = Array(rest)
    }

    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}

enum Hooks {
    /// `curl -s -S -i -x PROXY URL …` (no Expect: 100-continue, bounded).
    static func curl(_ proxy: ProxyHarness, _ url: String, _ extra: [String] = []) async throws -> CurlResponse {
        let result = try await CurlCLI.run(
            ["-s", "-S", "-i", "--suppress-connect-headers", "--max-time", "20", "-H", "Expect:", "-x", proxy.proxyURL] + extra + [url],
            timeout: .seconds(30))
        return CurlResponse(result)
    }

    /// Writes `yaml` as `rules.yaml` in `directory` and loads it.
    static func store(_ directory: TemporaryDirectory, _ yaml: String,
                      environment: [String: String] = [:]) throws -> RuleStore {
        try directory.write(yaml, to: "rules/rules.yaml")
        return try RuleStore(paths: [directory.path + "/rules"], environment: environment)
    }

    /// The load failure's text when `yaml` does not load, nil when it loads.
    static func loadFailure(_ directory: TemporaryDirectory, _ yaml: String) throws -> String? {
        try directory.write(yaml, to: "rules/rules.yaml")
        do throws(RuleLoadFailure) {
            _ = try RuleStore(paths: [directory.path + "/rules"], environment: [:])
            return nil
        } catch {
            return error.description
        }
    }

    /// The records of the exchanges (every hop), waiting (bounded) until at least `count` arrived.
    static func records(_ proxy: ProxyHarness, count: Int = 1) async -> [FlowRecord] {
        await proxy.recorder.waitFor(count: count, timeout: .seconds(10)).sorted { $0.id < $1.id }
    }

    /// Every event of every record, as `action` or `action: detail`, in record then event order.
    static func eventTexts(_ records: [FlowRecord]) -> [String] {
        records.flatMap { $0.events.map(\.logText) }
    }

    /// Whether `texts` contains entries matching `prefixes` in that relative order.
    static func inOrder(_ texts: [String], _ prefixes: [String]) -> Bool {
        var index = texts.startIndex
        for prefix in prefixes {
            guard let found = texts[index...].firstIndex(where: { $0.hasPrefix(prefix) }) else { return false }
            index = found + 1
        }
        return true
    }

    /// The repository root (this file is Tests/IntegrationTests/HookTestSupport.swift).
    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The built `hookproxy` executable (`swift build` puts it in .build/debug).
    static var executable: String? {
        let candidates = [repositoryRoot + "/.build/debug/hookproxy"]
            + (ProcessInfo.processInfo.environment["HOOKPROXY_BIN"].map { [$0] } ?? [])
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs a program (no shell), bounded; kills it after `timeout`.
    static func run(_ program: String, _ args: [String], timeout: Duration = .seconds(30),
                    environment: [String: String]? = nil) async throws
        -> (exitCode: Int32, stdout: String, stderr: String)
    {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = args
        if let environment { process.environment = environment }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("hp-out-\(UUID().uuidString)")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("hp-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
        process.standardOutput = outHandle
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? outHandle.close()
        try? errHandle.close()
        let stdout = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        return (process.terminationStatus, stdout, stderr)
    }

    /// A port on 127.0.0.1 that refuses connections while the returned value lives (keep it until the test ends:
    /// a port merely bound and closed can be taken by a test running beside this one).
    static func closedPort() throws -> RefusingPort {
        try RefusingPort()
    }
}

/// Runs `body` with a started TestOrigin and always shuts it down.
func withOrigin<T>(tls: TestTLSIdentity? = nil, clientCA: TestCertificate? = nil,
                   proxyAuth: TestOrigin.Credentials? = nil,
                   _ body: (TestOrigin) async throws -> T) async throws -> T {
    let origin = try await TestOrigin.start(tls: tls, clientCA: clientCA, proxyAuth: proxyAuth)
    do {
        let result = try await body(origin)
        try? await origin.shutdown()
        return result
    } catch {
        try? await origin.shutdown()
        throw error
    }
}

/// Runs `body` with hookproxy in-process using `rules` (and further configuration).
func withHookProxy<T>(rules: RuleStore?, _ configure: (inout ProxyConfiguration) -> Void = { _ in },
                      _ body: (ProxyHarness) async throws -> T) async throws -> T {
    try await withProxy({ configuration in
        configuration.rules = rules
        configure(&configuration)
    }, body)
}

/// YAML for a list of strings, each double-quoted.
func yamlList(_ items: [String]) -> String {
    "[" + items.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
}

/// A proxy intercepting `localhost` with its CA in `directory`, trusting the test root for upstream TLS (a `trust`
/// rule with `ca_file`), for tests of TLS origins behind an intercepted tunnel. `body` gets the proxy and the path of
/// hookproxy's CA certificate (for curl's `--cacert`).
func withInterceptingProxy<T>(extraRules: String = "", _ configure: (inout ProxyConfiguration) -> Void = { _ in },
                              _ body: (ProxyHarness, String) async throws -> T) async throws -> T {
    let directory = try TemporaryDirectory()
    let root = try directory.writePEM([TestCA.shared.root], to: "R.pem")
    let store = try Hooks.store(directory, """
        rules:
          - name: trust-test-root
            match: { host: localhost }
            trust: { ca_file: \(root) }

        """ + extraRules)
    return try await withHookProxy(rules: store, { configuration in
        configuration.interceptHosts = ["localhost"].compactMap(HostGlob.init)
        configuration.caDirectory = directory.path + "/ca"
        configure(&configuration)
    }) { proxy in
        try await body(proxy, try proxy.server.certificateAuthority().certificatePath)
    }
}

extension Hooks {
    /// Rules for a TLS server on `localhost:PORT` that asks for a client certificate (the test CA's client
    /// certificate): `c.test` maps there with `on_challenge.client_certificate`, `n.test` maps there without one;
    /// both trust the test root. The files go in `directory`, which the caller keeps for the test's length.
    static func clientCertificateRules(in directory: TemporaryDirectory, port: Int) throws -> RuleStore {
        let ca = TestCA.shared
        let root = try directory.writePEM([ca.root], to: "root.pem")
        let cert = try directory.writePEM([ca.client], to: "client.pem")
        let key = try directory.writeKey(ca.client, to: "client.key")
        return try store(directory, """
            rules:
              - name: with-cert
                match: { host: c.test }
                map_remote: { to: "https://localhost:\(port)" }
                trust: { ca_file: "\(root)" }
                on_challenge: { client_certificate: { cert: "\(cert)", key: "\(key)" } }
              - name: without-cert
                match: { host: n.test }
                map_remote: { to: "https://localhost:\(port)" }
                trust: { ca_file: "\(root)" }

            """)
    }
}
