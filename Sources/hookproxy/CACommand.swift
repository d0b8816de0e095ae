import ArgumentParser
import ProxyServer

/// `hookproxy ca [path|pem|fingerprint]`: creates the interception CA if missing and prints it.
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca", abstract: "Create the local interception CA if missing, and print its path, PEM or fingerprint.")

    enum Show: String, ExpressibleByArgument, CaseIterable {
        case path, pem, fingerprint
    }

    @Argument(help: "What to print: path, pem (default) or fingerprint.")
    var show: Show = .pem

    @Option(name: .long, help: "Directory of the CA (default ~/.hookproxy).")
    var caDir: String?

    func run() throws {
        let ca: CertificateAuthority
        do {
            ca = try CertificateAuthority.loadOrCreate(directory: caDir ?? ProxyConfiguration.defaultCADirectory)
        } catch {
            StandardStreams.error(error.description)
            throw ExitCode(1)
        }
        switch show {
        case .path: StandardStreams.output(ca.certificatePath)
        case .pem: StandardStreams.output(ca.certificatePEM.trimmingTrailingNewlines)
        case .fingerprint: StandardStreams.output(ca.fingerprint)
        }
    }
}

extension String {
    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
