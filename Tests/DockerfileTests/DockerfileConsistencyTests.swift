import Foundation
import ProxyTestSupport
import Testing

/// No Docker engine runs on the build machines, so docker/Dockerfile is never built here. These tests read it as
/// text and hold it to the Makefile, the single source of truth: the build stage installs exactly
/// `SYSTEM_PACKAGES` and runs `swift build` with exactly `SWIFT_BUILD_FLAGS`. They also check what the runtime
/// stage, the entrypoint and docker/compose.yaml promise. No network, no docker.
@Suite("Dockerfile consistency")
struct DockerfileConsistencyTests {
    let repo = RepoFiles()

    @Test("the build stage installs exactly the Makefile's SYSTEM_PACKAGES")
    func buildStagePackages() throws {
        let makefile = try repo.makefileVariables()
        let wanted = try #require(makefile["SYSTEM_PACKAGES"], "Makefile has no SYSTEM_PACKAGES").words
        for needed in ["libcurl4-openssl-dev", "libssl-dev", "pkg-config"] {
            #expect(wanted.contains(needed), "Makefile SYSTEM_PACKAGES lacks \(needed)")
        }
        let build = try #require(try repo.dockerfile().buildStage, "Dockerfile has no stage FROM a swift image")
        let installed = build.aptInstalledPackages
        let missing = wanted.filter { !installed.contains($0) }
        let extra = installed.filter { !wanted.contains($0) }
        #expect(missing.isEmpty, "build stage does not install Makefile packages: \(missing)")
        #expect(extra.isEmpty, "build stage installs packages the Makefile does not: \(extra); add them to SYSTEM_PACKAGES")
    }

    @Test("the build stage runs swift build with exactly the Makefile's SWIFT_BUILD_FLAGS")
    func buildFlags() throws {
        let flags = try #require(try repo.makefileVariables()["SWIFT_BUILD_FLAGS"], "Makefile has no SWIFT_BUILD_FLAGS").words
        let build = try #require(try repo.dockerfile().buildStage)
        let builds = build.swiftBuildInvocations
        let compiles = builds.filter { !$0.contains("--show-bin-path") }
        #expect(!compiles.isEmpty, "build stage never runs `swift build`")
        for invocation in compiles {
            #expect(invocation == flags, "`swift build \(invocation.joined(separator: " "))` differs from the Makefile's `swift build \(flags.joined(separator: " "))`")
        }
        for invocation in builds where invocation.contains("--show-bin-path") {
            #expect(invocation.filter { $0 != "--show-bin-path" } == flags, "--show-bin-path must use the same flags, or it names another build's directory")
        }
    }

    @Test("the runtime stage is slim Debian with the runtime libraries, a non-root user and port 8080")
    func runtimeStage() throws {
        let dockerfile = try repo.dockerfile()
        let runtime = try #require(dockerfile.stages.last)
        let build = try #require(dockerfile.buildStage)
        #expect(runtime.index != build.index, "the last stage must be the runtime stage, not the build stage")
        #expect(runtime.image.hasPrefix("debian:") || runtime.image.hasPrefix("ubuntu:"), "runtime image: \(runtime.image)")
        // Same distribution release in both stages, so libcurl.so.4 / libssl.so.3 are the ones linked against.
        let release = runtime.image.split(separator: ":").last.map { $0.split(separator: "-")[0] } ?? ""
        #expect(!release.isEmpty && build.image.hasSuffix("-\(release)"), "build image \(build.image) is not on the runtime's release \(release)")

        let packages = runtime.aptInstalledPackages
        for needed in ["libcurl4", "libssl3", "ca-certificates"] {
            #expect(packages.contains(needed), "runtime stage does not install \(needed)")
        }
        #expect(packages.allSatisfy { !$0.hasSuffix("-dev") }, "runtime stage installs development packages: \(packages)")

        let user = try #require(runtime.arguments(of: "USER").last, "runtime stage sets no USER").split(separator: ":")[0]
        #expect(user != "root" && user != "0", "runtime stage runs as root")
        #expect(runtime.arguments(of: "EXPOSE").flatMap(\.words).contains("8080"), "runtime stage does not EXPOSE 8080")
        #expect(runtime.arguments(of: "VOLUME").contains { $0.contains("/data") }, "runtime stage declares no /data volume")
    }

    @Test("the entrypoint runs hookproxy with proxy auth from the environment")
    func entrypoint() throws {
        let runtime = try #require(try repo.dockerfile().stages.last)
        let entrypoint = try #require(runtime.arguments(of: "ENTRYPOINT").last)
        #expect(entrypoint.contains("hookproxy-entrypoint"), "ENTRYPOINT: \(entrypoint)")
        #expect(runtime.arguments(of: "COPY").contains { $0.hasPrefix("docker/entrypoint.sh ") })
        let script = try repo.text("docker/entrypoint.sh")
        for piece in ["--listen 0.0.0.0:8080", "--rules /rules", "--ca-dir /data/ca", "--har /data/logs/hookproxy.har",
                      "--proxy-auth \"$auth\"", "HOOKPROXY_PROXY_AUTH", "HOOKPROXY_ALLOW_OPEN_PROXY"] {
            #expect(script.contains(piece), "docker/entrypoint.sh lacks \(piece)")
        }
    }

    @Test("the entrypoint refuses to be an open proxy and passes other subcommands through")
    func entrypointBehaviour() throws {
        let fake = try FakeHookproxy()
        defer { fake.remove() }
        let script = repo.root.appendingPathComponent("docker/entrypoint.sh").path

        let refused = try fake.run(script, [], environment: [:])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("HOOKPROXY_PROXY_AUTH") && refused.stderr.contains("HOOKPROXY_ALLOW_OPEN_PROXY"))
        #expect(fake.calls().isEmpty, "hookproxy started without proxy auth")

        let malformed = try fake.run(script, ["run"], environment: ["HOOKPROXY_PROXY_AUTH": "no-colon"])
        #expect(malformed.status == 1)
        #expect(fake.calls().isEmpty)

        let check = try fake.run(script, ["check", "--rules", "/rules"], environment: [:])
        #expect(check.status == 0)
        #expect(fake.calls() == ["check --rules /rules"])
    }

    @Test("compose mounts the rules at /rules, keeps /data in a named volume and publishes 8080 on loopback")
    func compose() throws {
        let compose = try repo.text("docker/compose.yaml")
        let mounts = compose.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("- ") }.map { $0.dropFirst(2).trimmingCharacters(in: CharacterSet(charactersIn: "\"' ")) }
        #expect(mounts.contains { $0.hasPrefix("../rules:/rules") }, "compose.yaml does not mount ../rules at /rules")
        #expect(mounts.contains { $0.hasPrefix("hookproxy-data:/data") }, "compose.yaml keeps /data in no named volume")
        #expect(mounts.contains("127.0.0.1:8080:8080"), "compose.yaml must publish 8080 on 127.0.0.1 only")
        #expect(compose.contains("HOOKPROXY_PROXY_AUTH:"))
        #expect(compose.contains("dockerfile: docker/Dockerfile"))
    }

    @Test(".dockerignore keeps build output, git history and bench results out of the context")
    func dockerignore() throws {
        let lines = Set(try repo.text(".dockerignore").split(separator: "\n").map { String($0).trimmingCharacters(in: .whitespaces) })
        for pattern in [".build*", ".git", "bench/results"] {
            #expect(lines.contains(pattern), ".dockerignore lacks \(pattern)")
        }
    }
}

// MARK: - Reading the files

/// The repository around this test file, found from `#filePath` (the directory holding Package.swift and Makefile).
struct RepoFiles {
    let root: URL

    init(filePath: String = #filePath) {
        var dir = URL(fileURLWithPath: filePath).deletingLastPathComponent()
        let fm = FileManager.default
        while dir.path != "/" && !(fm.fileExists(atPath: dir.appendingPathComponent("Package.swift").path)
                                   && fm.fileExists(atPath: dir.appendingPathComponent("Makefile").path)) {
            dir.deleteLastPathComponent()
        }
        root = dir
    }

    func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// `NAME := value` (also `=`, `?=`), with `\` continuations joined.
    func makefileVariables() throws -> [String: String] {
        var result: [String: String] = [:]
        for line in joinContinuations(try text("Makefile")) where !line.hasPrefix("\t") {
            let pattern = #/^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$/#
            if let match = line.wholeMatch(of: pattern) {
                result[String(match.1)] = String(match.2).split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                    .trimmingCharacters(in: .whitespaces)
            }
        }
        return result
    }

    func dockerfile() throws -> Dockerfile { Dockerfile(try text("docker/Dockerfile")) }
}

/// A Dockerfile as stages of instructions: comments dropped, `\` continuations joined (comment lines inside a
/// continuation are dropped too, as Docker does).
struct Dockerfile {
    struct Stage {
        let index: Int
        let image: String
        var instructions: [(keyword: String, arguments: String)] = []

        func arguments(of keyword: String) -> [String] {
            instructions.filter { $0.keyword == keyword }.map(\.arguments)
        }

        /// Packages named after `apt-get install` in RUN instructions (options and `=version` left out).
        var aptInstalledPackages: [String] {
            arguments(of: "RUN").flatMap { run in
                run.matches(of: #/apt-get\s+(?:-\S+\s+)*install\s+([^;&|]*)/#).flatMap { match in
                    match.1.words.filter { !$0.hasPrefix("-") }.map { String($0.split(separator: "=")[0]) }
                }
            }
        }

        /// The arguments of every `swift build` in RUN instructions, up to the end of its command.
        var swiftBuildInvocations: [[String]] {
            arguments(of: "RUN").flatMap { run in
                run.matches(of: #/\bswift\s+build\b([^;&|)"'`\n]*)/#).map { $0.1.words }
            }
        }
    }

    private(set) var stages: [Stage] = []

    init(_ text: String) {
        var logical: [String] = []
        var current = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#") || (line.isEmpty && current.isEmpty) { continue }
            if line.hasSuffix("\\") {
                current += String(line.dropLast()) + " "
            } else {
                logical.append(current + line)
                current = ""
            }
        }
        if !current.isEmpty { logical.append(current) }

        for line in logical where !line.isEmpty {
            let parts = line.split(separator: " ", maxSplits: 1)
            let keyword = parts[0].uppercased()
            let arguments = parts.count > 1 ? String(parts[1]).trimmingCharacters(in: .whitespaces) : ""
            if keyword == "FROM" {
                let words = arguments.words.filter { !$0.hasPrefix("--") }
                stages.append(Stage(index: stages.count, image: words.first ?? ""))
            } else if !stages.isEmpty {
                stages[stages.count - 1].instructions.append((keyword, arguments))
            }
        }
    }

    /// The stage built FROM an official swift image.
    var buildStage: Stage? { stages.first { $0.image.hasPrefix("swift:") } }
}

private func joinContinuations(_ text: String) -> [String] {
    var lines: [String] = []
    var current = ""
    for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if raw.hasSuffix("\\") {
            current += String(raw.dropLast()) + " "
        } else {
            lines.append(current + raw)
            current = ""
        }
    }
    return lines
}

extension StringProtocol {
    var words: [String] {
        let parts: [SubSequence] = split(whereSeparator: { $0.isWhitespace })
        return parts.map { String($0) }
    }
}

// MARK: - Running the entrypoint against a stand-in hookproxy

/// A temporary directory with a `hookproxy` shell script that records its arguments instead of proxying.
struct FakeHookproxy {
    let dir: URL
    var log: URL { dir.appendingPathComponent("calls") }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("fake-hookproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let script = "#!/bin/sh\necho \"$*\" >> '\(log.path)'\n"
        let path = dir.appendingPathComponent("hookproxy").path
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
    }

    func run(_ script: String, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, stderr: String) {
        try? FileManager.default.removeItem(at: log)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [script] + arguments
        process.environment = ["PATH": "\(dir.path):/usr/bin:/bin"].merging(environment) { $1 }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = Data(PipeReading.readAll(errors.fileHandleForReading))
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func calls() -> [String] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func remove() { try? FileManager.default.removeItem(at: dir) }
}
