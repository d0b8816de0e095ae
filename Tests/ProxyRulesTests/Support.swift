import Foundation
import ProxyModel
@testable import ProxyRules

enum LoadOutcome {
    case success(RuleSet)
    case failure([String])
}

/// A fresh temporary directory for rule files, removed by `remove()`.
struct TempRules {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "hookproxy-rules-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    @discardableResult
    func write(_ name: String, _ text: String) -> String {
        let full = path + "/" + name
        try! FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                 withIntermediateDirectories: true)
        try! Data(text.utf8).write(to: URL(fileURLWithPath: full))
        return full
    }

    @discardableResult
    func write(_ name: String, bytes: [UInt8]) -> String {
        let full = path + "/" + name
        try! Data(bytes).write(to: URL(fileURLWithPath: full))
        return full
    }

    func delete(_ name: String) { try? FileManager.default.removeItem(atPath: path + "/" + name) }
    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Loads the directory; on failure the error lines with the directory prefix removed.
    func load(env: [String: String] = [:]) -> LoadOutcome {
        do throws(RuleLoadFailure) {
            return .success(try RuleLoader.load(paths: [path], environment: env))
        } catch {
            return .failure(error.errors.map { $0.description.replacingOccurrences(of: path + "/", with: "") })
        }
    }

    func loaded(env: [String: String] = [:]) throws -> RuleSet {
        switch load(env: env) {
        case .success(let set): return set
        case .failure(let errors): throw TestLoadError(errors: errors)
        }
    }

    func errors(env: [String: String] = [:]) -> [String] {
        if case .failure(let errors) = load(env: env) { return errors }
        return []
    }

    func warnings(env: [String: String] = [:]) -> [String] {
        if case .success(let set) = load(env: env) {
            return set.warnings.map { $0.description.replacingOccurrences(of: path + "/", with: "") }
        }
        return ["(load failed)"]
    }
}

/// Loads one YAML text as `r.yaml` and returns its error lines (`r.yaml:L:C: message`).
func errorsOf(_ yaml: String, env: [String: String] = [:], files: [String: String] = [:]) -> [String] {
    let dir = TempRules()
    defer { dir.remove() }
    for (name, text) in files { dir.write(name, text) }
    dir.write("r.yaml", yaml)
    return dir.errors(env: env)
}

/// Loads one YAML text as a RuleSet (crashing the test on failure with the errors).
func ruleSet(_ yaml: String, env: [String: String] = [:], files: [String: String] = [:]) throws -> RuleSet {
    let dir = TempRules()
    defer { dir.remove() }
    for (name, text) in files { dir.write(name, text) }
    dir.write("r.yaml", yaml)
    switch dir.load(env: env) {
    case .success(let set): return set
    case .failure(let errors): throw TestLoadError(errors: errors)
    }
}

struct TestLoadError: Error, CustomStringConvertible {
    var errors: [String]
    var description: String { errors.joined(separator: "\n") }
}

func request(_ method: String = "GET", _ url: String, headers: [(String, String)] = []) -> RequestHead {
    RequestHead(method: method, url: ProxyURL(string: url)!, headers: HeaderFields(headers.map { HeaderField(name: $0.0, value: $0.1) }))
}
