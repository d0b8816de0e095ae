import ArgumentParser

/// The `hookproxy` command: `run` (the default), `check`, `pin`, `ca` and `replay`.
@main
struct Hookproxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hookproxy",
        abstract: "A local HTTP/HTTPS debugging proxy whose rules reach redirects, auth challenges and server trust.",
        version: "hookproxy 0.1.0",
        subcommands: [RunCommand.self, CheckCommand.self, PinCommand.self, CACommand.self, ReplayCommand.self],
        defaultSubcommand: RunCommand.self
    )

    static func main() async {
        GnuTLSImplicitInit.skip()
        await main(nil)
    }
}
