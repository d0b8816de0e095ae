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
            let set = try RuleStore(paths: paths).current
            for warning in set.warnings { StandardStreams.error("\(warning)") }
            StandardStreams.output(set.summary)
        } catch {
            StandardStreams.error("\(error)")
            throw ExitCode(1)
        }
    }
}
