import ArgumentParser
import ProxyModel
import ProxyUpstream

/// `hookproxy pin HOST[:PORT]`: prints the server's certificate chain with SPKI pins and a `trust:` snippet.
struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Print a server's certificate chain, its pins, and a ready-to-paste trust rule.")

    @Argument(help: "HOST or HOST:PORT (default port 443).")
    var target: String

    @Option(name: .long, help: "PEM file to verify against instead of the system store.")
    var cacert: String?

    @Option(name: .long, help: "Name to send as SNI and to check the certificate against (default: HOST).")
    var servername: String?

    func run() throws {
        guard let (host, port) = ProxyURL.splitAuthority(Substring(target), defaultPort: 443) else {
            throw ValidationError("expected HOST or HOST:PORT, got '\(target)'")
        }
        let report: ChainReport
        do {
            report = try ChainInspector.inspect(host: host, port: port, serverName: servername, caFile: cacert)
        } catch {
            StandardStreams.error(error.message)
            throw ExitCode(1)
        }
        let store = cacert ?? "the system store"
        for (index, certificate) in report.presented.enumerated() {
            // A certificate off the chain gets no `pin:` line: a rule pinning its key would never match.
            let pinLine = report.offChain[index].map { reason in
                "  skipped:    no pin: \(Self.describe(reason, store: store)); a pin of its key never matches"
            } ?? "  pin:        \(certificate.pin)"
            StandardStreams.output("""
                certificate \(index)\(index == 0 ? " (leaf)" : "")
                  subject:    \(certificate.subject)
                  issuer:     \(certificate.issuer)
                  not before: \(certificate.notBefore)
                  not after:  \(certificate.notAfter)
                  sha256:     \(certificate.fingerprint)
                \(pinLine)
                """)
        }
        if let failure = report.verificationFailure {
            StandardStreams.output("verifies against \(store): no — \(failure)")
        } else {
            StandardStreams.output("verifies against \(store): yes")
        }
        let name = servername ?? host
        let pins = report.presented.indices.filter { report.offChain[$0] == nil }
            .map { "\"\(report.presented[$0].pin)\"" }.joined(separator: ", ")
        StandardStreams.output("""

            # paste into a rule file (pin the leaf and its issuers: any one matching passes):
            rules:
              - name: pin-\(name)
                match: { host: "\(name)"\(port == 443 ? "" : ", port: \(port)") }
                trust: { pinning: public_key, pins: [\(pins)]\(cacert.map { ", ca_file: \"\($0)\"" } ?? "") }
            """)
    }

    private static func describe(_ reason: ChainReport.OffChainReason, store: String) -> String {
        switch reason {
        case .notOnVerifiedChain:
            "not on the chain that verifies against \(store) (the server sent it beside the chain)"
        case .notOnSignedPath:
            "it signs neither the leaf nor a certificate that signs the leaf (the server sent it beside the chain)"
        }
    }
}
