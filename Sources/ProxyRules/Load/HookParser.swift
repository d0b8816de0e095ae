import FoundationEssentials
import ProxyModel

/// Validates `on_redirect`, `on_challenge` and `trust` and turns them into the ProxyModel policy types.
/// (What the policies do at run time belongs to the server and upstream modules.)
struct HookParser {
    let ctx: FileContext

    static let onRedirectKeys = ["action", "max_hops", "rewrite", "same_host_only"]
    static let rewriteKeys = ["from", "to"]
    static let onChallengeKeys = ["action", "schemes", "username", "password", "password_env", "client_certificate"]
    static let clientCertificateKeys = ["cert", "key", "passphrase_env"]
    static let trustKeys = ["pinning", "pins", "certificates", "ca_file", "allow_invalid_certificates",
                            "validate_domain_name", "verify_time"]

    func choice<T: RawRepresentable & CaseIterable>(_ node: YAMLNode, _ what: String, _: T.Type) -> T? where T.RawValue == String {
        guard let text = ctx.string(node, what) else { return nil }
        if let value = T(rawValue: text) { return value }
        let names = T.allCases.map(\.rawValue)
        var message = "'\(what)' must be one of \(names.joined(separator: ", ")), found '\(text)'"
        if let near = Suggest.nearest(to: text, in: names) { message += " — did you mean '\(near)'?" }
        ctx.error(node, message)
        return nil
    }

    // MARK: on_redirect

    func onRedirect(_ node: YAMLNode, rule: String) -> RedirectPolicy? {
        guard let map = ctx.mapping(node, "on_redirect", allowed: Self.onRedirectKeys) else { return nil }
        let before = ctx.errors.count
        var policy = RedirectPolicy(rule: rule, action: .pass)
        if let node = map["action"], let action = choice(node, "on_redirect.action", RedirectPolicy.Action.self) {
            policy.action = action
        }
        if let node = map["max_hops"], let hops = ctx.int(node, "on_redirect.max_hops", range: 1...100) {
            policy.maxHops = hops
        }
        if let node = map["same_host_only"], let value = ctx.bool(node, "on_redirect.same_host_only") {
            policy.sameHostOnly = value
        }
        if let node = map["rewrite"], let rewrite = ctx.mapping(node, "on_redirect.rewrite", allowed: Self.rewriteKeys) {
            if let fromNode = rewrite["from"], let toNode = rewrite["to"] {
                if let from = ctx.nonEmptyString(fromNode, "on_redirect.rewrite.from"),
                   let to = ctx.string(toNode, "on_redirect.rewrite.to") {
                    if !(from.hasPrefix("http://") || from.hasPrefix("https://")) {
                        ctx.error(fromNode, "'on_redirect.rewrite.from' is a prefix of an absolute Location: it starts with http:// or https://")
                    }
                    policy.rewrite = .init(from: from, to: to)
                }
            } else {
                ctx.error(node, "'on_redirect.rewrite' needs both 'from' and 'to'")
            }
        }
        if policy.action == .rewrite && !map.has("rewrite") {
            ctx.error(map["action"], "'on_redirect.action: rewrite' needs 'rewrite: {from, to}'")
        }
        return ctx.errors.count == before ? policy : nil
    }

    // MARK: on_challenge

    func onChallenge(_ node: YAMLNode, rule: String) -> ChallengePolicy? {
        guard let map = ctx.mapping(node, "on_challenge", allowed: Self.onChallengeKeys) else { return nil }
        let before = ctx.errors.count
        var policy = ChallengePolicy(rule: rule, action: .pass)
        if let node = map["action"], let action = choice(node, "on_challenge.action", ChallengePolicy.Action.self) {
            policy.action = action
        }
        if let node = map["schemes"], let names = ctx.stringList(node, "on_challenge.schemes") {
            var schemes: [AuthScheme] = []
            for (name, nameNode) in names {
                if let scheme = AuthScheme(rawValue: name.lowercased()) { schemes.append(scheme) }
                else {
                    ctx.error(nameNode, "'on_challenge.schemes' items are \(AuthScheme.allCases.map(\.rawValue).joined(separator: ", ")), found '\(name)'")
                }
            }
            if schemes.isEmpty && names.isEmpty { ctx.error(node, "'on_challenge.schemes' must not be empty (omit it for any)") }
            policy.schemes = schemes
        }
        if let node = map["username"] { policy.username = ctx.nonEmptyString(node, "on_challenge.username") }
        if map.has("password") && map.has("password_env") {
            ctx.error(map.keyNode("password_env"), "'password' and 'password_env' exclude each other; keep password_env")
        } else if let node = map["password"] {
            policy.password = ctx.string(node, "on_challenge.password")
            if case .scalar(let scalar) = node, !scalar.string.contains("${") {
                ctx.warning(node, "a literal password in a rule file; prefer 'password_env: VARIABLE' so the secret stays out of the file")
            }
        } else if let node = map["password_env"], let name = ctx.nonEmptyString(node, "on_challenge.password_env") {
            if let value = ctx.environment[name] { policy.password = value }
            else {
                ctx.warning(node, "environment variable '\(name)' (password_env) is not set; the credential has no password")
            }
        }
        if let node = map["client_certificate"] { policy.clientCertificate = clientCertificate(node) }
        if policy.action == .useCredential && policy.username == nil && !map.has("username") {
            ctx.error(map["action"], "'on_challenge.action: use_credential' needs 'username'")
        }
        return ctx.errors.count == before ? policy : nil
    }

    func clientCertificate(_ node: YAMLNode) -> ClientCertificate? {
        guard let map = ctx.mapping(node, "on_challenge.client_certificate", allowed: Self.clientCertificateKeys)
        else { return nil }
        guard let certNode = map["cert"], let keyNode = map["key"] else {
            ctx.error(node, "'client_certificate' needs 'cert' and 'key' (PEM files)")
            return nil
        }
        guard let cert = existingFile(certNode, "client_certificate.cert"),
              let key = existingFile(keyNode, "client_certificate.key") else { return nil }
        var passphrase: String?
        if let node = map["passphrase_env"], let name = ctx.nonEmptyString(node, "client_certificate.passphrase_env") {
            passphrase = ctx.environment[name]
            if passphrase == nil {
                ctx.warning(node, "environment variable '\(name)' (passphrase_env) is not set; the key is read without a passphrase")
            }
        }
        return ClientCertificate(certificatePath: cert, keyPath: key, passphrase: passphrase)
    }

    /// The absolute path of a referenced file that must exist.
    func existingFile(_ node: YAMLNode, _ what: String) -> String? {
        guard let path = ctx.nonEmptyString(node, what) else { return nil }
        let full = ctx.resolve(path)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory else {
            ctx.error(node, "\(what) '\(path)' not found (looked for \(full))")
            return nil
        }
        ctx.addDependency(full)
        return full
    }

    // MARK: trust

    func trust(_ node: YAMLNode, rule: String) -> TrustPolicy? {
        guard let map = ctx.mapping(node, "trust", allowed: Self.trustKeys) else { return nil }
        let before = ctx.errors.count
        var policy = TrustPolicy(rule: rule)
        if let node = map["pinning"], let pinning = choice(node, "trust.pinning", TrustPolicy.Pinning.self) {
            policy.pinning = pinning
        }
        if let node = map["allow_invalid_certificates"],
           let value = ctx.bool(node, "trust.allow_invalid_certificates") {
            policy.allowInvalidCertificates = value
        }
        if let node = map["validate_domain_name"], let value = ctx.bool(node, "trust.validate_domain_name") {
            policy.validateDomainName = value
        }
        var keyHashes: [[UInt8]] = []
        if let node = map["pins"] {
            if policy.pinning == .certificate {
                ctx.error(map.keyNode("pins"), "rule '\(rule)': 'pins' are public-key hashes; 'pinning: certificate' takes 'certificates' (or use 'pinning: public_key')")
            }
            let items: [YAMLNode] = if case .sequence(let seq) = node { Array(seq) } else { [node] }
            for item in items {
                guard let text = ctx.string(item, "trust.pins") else { continue }
                for pin in text.split(separator: ";") {
                    if let digest = Pins.decode(String(pin).trimmingWhitespace()) { keyHashes.append(digest) }
                    else { ctx.error(item, "bad pin '\(pin)': a pin is 'sha256//' followed by the base64 of a 32-byte SHA-256 (see 'hookproxy pin HOST')") }
                }
            }
        }
        var certificates: [[UInt8]] = []
        if let node = map["certificates"], let paths = ctx.stringList(node, "trust.certificates") {
            for (path, pathNode) in paths {
                certificates += loadCertificates(path, node: pathNode)
            }
        }
        if let node = map["ca_file"], let path = existingFile(node, "trust.ca_file") {
            policy.caFile = path
        }
        if let node = map["verify_time"], let text = ctx.string(node, "trust.verify_time") {
            do throws(UTCInstant.ParseError) {
                policy.verifyTime = try UTCInstant(parsing: text)
            } catch {
                ctx.error(node, "rule '\(rule)': 'trust.verify_time' \(error)")
            }
        }

        if policy.pinning == .none && (map.has("pins") || map.has("certificates")) && !policy.allowInvalidCertificates {
            ctx.warning(map.keyNode("pinning") ?? node, "rule '\(rule)': pins and certificates are ignored with 'pinning: none'")
        }
        switch policy.pinning {
        case .none: break
        case .certificate:
            policy.pinnedCertificates = certificates
        case .publicKey:
            policy.pinnedKeyHashes = keyHashes + certificates.compactMap { Pins.spkiSHA256(ofCertificate: $0) }
            policy.pinnedCertificates = certificates
        }
        let pinsNothing = policy.pinning == .none
            || (policy.pinning == .certificate && policy.pinnedCertificates.isEmpty)
            || (policy.pinning == .publicKey && policy.pinnedKeyHashes.isEmpty)
        if ctx.errors.count == before {
            if policy.allowInvalidCertificates && policy.validateDomainName && pinsNothing {
                ctx.error(node, "rule '\(rule)': allow_invalid_certificates with validate_domain_name and no pinning can never pass (AFSecurityPolicy rejects it); add pins or set validate_domain_name: false")
            }
            if policy.pinning != .none && pinsNothing {
                let what = policy.pinning == .certificate ? "certificates" : "pins or certificates"
                ctx.error(map.keyNode("pinning") ?? node, "rule '\(rule)': pinning: \(policy.pinning.rawValue) with no \(what) can never pass; add \(what)")
            }
        }
        return ctx.errors.count == before ? policy : nil
    }

    /// DER of every certificate in a PEM/DER file, or in every certificate file of a directory.
    func loadCertificates(_ path: String, node: YAMLNode) -> [[UInt8]] {
        let full = ctx.resolve(path)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) else {
            ctx.error(node, "certificate file '\(path)' not found (looked for \(full))")
            return []
        }
        ctx.addDependency(full)
        if isDirectory {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: full)) ?? []).sorted()
            var result: [[UInt8]] = []
            for name in names where !name.hasPrefix(".") && Pins.certificateExtensions.contains(Pins.extensionOf(name)) {
                let file = PathText.appending(name, to: full)
                ctx.addDependency(file)
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                switch Pins.certificates(in: [UInt8](data)) {
                case .success(let ders): result += ders
                case .failure(let failure): ctx.error(node, "'\(path)/\(name)': \(failure.reason)")
                }
            }
            return result
        }
        guard let data = FileManager.default.contents(atPath: full) else {
            ctx.error(node, "certificate file '\(path)' cannot be read")
            return []
        }
        switch Pins.certificates(in: [UInt8](data)) {
        case .success(let ders): return ders
        case .failure(let failure):
            ctx.error(node, "certificate file '\(path)': \(failure.reason)")
            return []
        }
    }
}
