import ProxyModel

/// A hook event as JSONL and HAR (`_hookproxy.events`) write it: `{hook, action, detail}`, and on a `trust` event
/// made in a handshake `chain: [{subject, issuer, not_after, pin}]`, the chain the server presented.
struct LogEvent: Encodable {
    var hook: String
    var action: String
    var detail: String
    var chain: [CertificateSummary]?

    init(_ event: HookEvent) {
        hook = event.hook.rawValue
        action = event.action
        detail = event.detail
        chain = event.chain
    }

    private enum CodingKeys: String, CodingKey { case hook, action, detail, chain }
    private enum CertificateKeys: String, CodingKey { case subject, issuer, notAfter = "not_after", pin }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(hook, forKey: .hook)
        try container.encode(action, forKey: .action)
        try container.encode(detail, forKey: .detail)
        guard let chain else { return }
        var certificates = container.nestedUnkeyedContainer(forKey: .chain)
        for certificate in chain {
            var fields = certificates.nestedContainer(keyedBy: CertificateKeys.self)
            try fields.encode(certificate.subject, forKey: .subject)
            try fields.encode(certificate.issuer, forKey: .issuer)
            try fields.encode(certificate.notAfter, forKey: .notAfter)
            try fields.encode(certificate.pin, forKey: .pin)
        }
    }

    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("hook", hook)
        json.field("action", action)
        json.field("detail", detail)
        if let chain {
            json.field("chain", array: chain) { json, certificate in
                json.beginObject()
                json.field("subject", certificate.subject)
                json.field("issuer", certificate.issuer)
                json.field("not_after", certificate.notAfter)
                json.field("pin", certificate.pin)
                json.endObject()
            }
        }
        json.endObject()
    }
}
