import ArgumentParser
import ProxyRules

/// `hookproxy check`: loads the rules and prints `ok: N rules in M files`, or every error as file:line:col.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check", abstract: "Validate rule files.")

    @Option(name: .long, help: "Rule file or directory (repeatable). Default: ./rules.")
    var rules: [String] = []

    func run() throws {
        let paths = rules.isEmpty ? ["rules"] : rules
        do {
            let store = try RuleStore(paths: paths)
            let set = store.current
            StandardStreams.output("ok: \(set.ruleCount) rules in \(set.fileCount) files")
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
    }
}
