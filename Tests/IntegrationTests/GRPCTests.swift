import Foundation
import ProxyTestSupport
import Testing

/// Issue 16, "gRPC works through an intercepted tunnel": Python grpcio's client, told to use hookproxy by
/// `grpc_proxy` (CONNECT), calls grpcio's server (TLS, the test CA's leaf) through the real `hookproxy run` binary,
/// which intercepts the host and speaks HTTP/2 on both sides: unary with trailing metadata, server streaming (each
/// message forwarded as it arrives), and an error status reaching the client as the server sent it.
@Suite("gRPC through an intercepted tunnel (issue 16)", .timeLimit(.minutes(3)))
struct GRPCTests {
    static var python: String { Hooks.repositoryRoot + "/.build/pyvenv/bin/python3" }
    /// Unary and failing calls made on new connections after the first three calls.
    static let rounds = 8

    /// Throttled exchanges went to their upstream over HTTP/1.1, which gRPC servers do not speak: with `--throttle`
    /// (a download rate, the presets too) every call failed with 502 (a review's find).
    @Test("grpcio unary, server streaming and an error status through hookproxy, throttled or not",
          arguments: [[String](), ["--throttle", "down=100000"]])
    func grpcThroughProxy(_ extra: [String]) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python), "no \(Self.python): run `make pydeps`")
        let executable = try #require(Hooks.executable)
        let directory = try TemporaryDirectory()
        let ca = TestCA.shared
        let chain = try directory.writePEM([ca.leaf, ca.intermediate], to: "chain.pem")
        let key = try directory.writeKey(ca.leaf, to: "leaf.key")
        let root = try directory.writePEM([ca.root], to: "R.pem")
        _ = try directory.write("rules:\n  - name: trust-test-root\n    match: { host: localhost }\n    trust: { ca_file: \(root) }\n",
                                to: "rules/rules.yaml")
        let caDir = directory.path + "/ca"
        let made = try await Hooks.run(executable, ["ca", "path", "--ca-dir", caDir])
        try #require(made.exitCode == 0, "\(made.stderr)")
        let caPath = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let server = try await GRPCServerProcess(python: Self.python, directory: directory, chain: chain, key: key)
        defer { server.stop() }
        let jsonl = directory.path + "/log.jsonl"
        try await withRunningHookproxy(["--intercept", "localhost", "--ca-dir", caDir, "--rules", directory.path + "/rules",
                                        "--jsonl", jsonl] + extra,
                                       in: directory) { proxy in
            let client = try directory.write(GRPCPeers.client, to: "grpc_client.py")
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().contains("proxy") }
            environment["grpc_proxy"] = proxy.proxyURL
            let (status, out, err) = try await Hooks.run(Self.python, [client, "localhost:\(server.port)", caPath, "\(Self.rounds)"],
                                                         timeout: .seconds(60), environment: environment)
            try #require(status == 0, "client failed: \(err)\nproxy: \(proxy.stdout)\n\(proxy.stderr)")
            let result = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out)")
            #expect(result["unary"] as? String == "echo:hello")
            #expect((result["unary_trailers"] as? [String: String])?["x-trailer"] == "yes", "trailing metadata intact")
            let stream = try #require(result["stream"] as? [[Any]])
            #expect(stream.map { $0[0] as? String } == ["message 0", "message 1", "message 2"])
            // Each message reached the client before the server sent the next one (0.5 s later): nothing waited
            // for the stream's end.
            let received = stream.compactMap { $0[1] as? Double }
            let sent = server.sendTimes
            #expect(sent.count == 3 && received.count == 3)
            if sent.count == 3 && received.count == 3 {
                #expect(received[0] < sent[1] && received[1] < sent[2], "sent \(sent), received \(received)")
            }
            let fail = try #require(result["fail"] as? [String: String], "the failing call succeeded")
            #expect(fail["code"] == "PERMISSION_DENIED")
            #expect(fail["details"] == "no entry for bob")
            // Unary calls on fresh connections: each went out while the client's message was still arriving, and
            // libcurl 7.88 lost a third of their answers ("Empty reply from server", a 502 to the client) until the
            // exchange learned to wait for the body's end that comes in the same read.
            let rounds = try #require(result["rounds"] as? [[Any]])
            #expect(rounds.count == Self.rounds)
            for (index, round) in rounds.enumerated() {
                #expect(round.first as? String == "echo:round \(index)", "round \(index): \(round)")
                #expect((round.last as? [String: String])?["code"] == "PERMISSION_DENIED", "round \(index): \(round)")
            }
            #expect(await eventually(timeout: .seconds(10)) { occurrences(of: "/test.Echo/", in: proxy.stdout) >= 3 + 2 * Self.rounds },
                    "\(proxy.stdout)")
            let lines = proxy.stdout.components(separatedBy: "\n").filter { $0.contains("/test.Echo/") }
            #expect(lines.allSatisfy { $0.contains(" h2 ") && $0.contains(" POST https://localhost:\(server.port)/test.Echo/") },
                    "\(lines)")
            print("console lines of the gRPC calls:\n" + lines.joined(separator: "\n"))
            // The log shows a call's status: the unary call's trailers, grpc-status 0 and its trailing metadata.
            let logged = { (try? String(contentsOfFile: jsonl, encoding: .utf8)) ?? "" }
            let unaryTrailers = #""response_trailers":[{"name":"grpc-status","value":"0"}"#
            #expect(await eventually(timeout: .seconds(10)) { logged().contains(unaryTrailers) }, "\(logged().suffix(2000))")
            #expect(logged().contains(#"{"name":"x-trailer","value":"yes"}"#), "\(logged().suffix(2000))")
        }
    }
}
