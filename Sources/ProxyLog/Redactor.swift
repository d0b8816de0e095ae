import Foundation
import ProxyModel

/// Decides what of an exchange may be written to a log: header values that carry secrets, query parameters the user
/// named, and the values hookproxy itself added. A value type, usable from any thread; the writers apply it on their
/// own threads, never on the event loop.
public struct Redactor: Sendable, Hashable {
    /// What a hidden value reads in every output.
    public static let mask = "<redacted>"
    /// Header names whose values are secrets unless `logSecrets` (compared case-insensitively).
    public static let secretHeaders = ["Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie"]

    /// `--log-secrets`: keep `secretHeaders` values and URL passwords. `FlowRecord.secretValues` stay hidden anyway.
    public var logSecrets: Bool
    /// `--redact-query NAME`: query parameters whose values are hidden in every URL (names compared case-insensitively).
    public var redactedQueryNames: Set<String>

    public init(logSecrets: Bool = false, redactQuery: [String] = []) {
        self.logSecrets = logSecrets
        self.redactedQueryNames = Set(redactQuery.map { $0.lowercased() })
    }

    /// The record as it may be logged: every rule of this type applied to headers, URLs, bodies, events and error.
    /// The result's `secretValues` is empty.
    public func redact(_ flow: FlowRecord) -> FlowRecord {
        let secrets = flow.secretValues.filter { !$0.isEmpty }.sorted { $0.utf8.count > $1.utf8.count }
        var out = flow
        out.url = url(flow.url, secrets: secrets)
        out.upstreamURL = flow.upstreamURL.map { url($0, secrets: secrets) }
        out.request.headers = headers(flow.request.headers, secrets: secrets)
        if let query = flow.request.url.query { out.request.url.query = self.query(query, secrets: secrets) }
        out.response?.headers = headers(flow.response?.headers ?? [], secrets: secrets)
        out.requestBody = flow.requestBody.map { body($0, secrets: secrets) }
        out.responseBody = flow.responseBody.map { body($0, secrets: secrets) }
        out.events = flow.events.map {
            HookEvent(hook: $0.hook, action: scrub($0.action, secrets), detail: scrub($0.detail, secrets))
        }
        out.error = flow.error.map { scrub($0, secrets) }
        out.client = scrub(flow.client, secrets)
        out.secretValues = []
        return out
    }

    /// Header values with `secretHeaders` masked (unless `logSecrets`) and secret values replaced.
    public func headers(_ fields: HeaderFields, secrets: [String] = []) -> HeaderFields {
        HeaderFields(fields.map { field in
            if !logSecrets, Redactor.secretHeaders.contains(where: { field.name.caseInsensitiveEquals($0) }) {
                return HeaderField(name: field.name, value: Redactor.mask)
            }
            return HeaderField(name: field.name, value: scrub(field.value, secrets))
        })
    }

    /// A URL string with named query parameters masked, a userinfo password masked (unless `logSecrets`), and secret
    /// values replaced. Anything that does not look like a URL is only scrubbed of secret values.
    public func url(_ text: String, secrets: [String] = []) -> String {
        var result = text
        // userinfo password: scheme://user:password@host
        if !logSecrets, let schemeEnd = result.range(of: "://") {
            let rest = result[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                result.replaceSubrange(authority.index(after: colon)..<at, with: Redactor.mask)
            }
        }
        if !redactedQueryNames.isEmpty, let question = result.firstIndex(of: "?") {
            let queryStart = result.index(after: question)
            let queryEnd = result[queryStart...].firstIndex(of: "#") ?? result.endIndex
            let redacted = query(String(result[queryStart..<queryEnd]), secrets: [])
            result.replaceSubrange(queryStart..<queryEnd, with: redacted)
        }
        return scrub(result, secrets)
    }

    /// A query string (without `?`) with the values of named parameters masked.
    public func query(_ query: String, secrets: [String] = []) -> String {
        guard !redactedQueryNames.isEmpty else { return scrub(query, secrets) }
        let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let decoded = (String(name).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(name))
            return isRedactedQueryName(decoded) ? "\(name)=\(Redactor.mask)" : String(pair)
        }
        return scrub(parts.joined(separator: "&"), secrets)
    }

    public func isRedactedQueryName(_ name: String) -> Bool {
        redactedQueryNames.contains(name.lowercased())
    }

    /// A captured body with every secret value's bytes replaced by the mask's bytes.
    func body(_ body: CapturedBody, secrets: [String]) -> CapturedBody {
        guard !secrets.isEmpty else { return body }
        var bytes = body.bytes
        for secret in secrets { bytes = Redactor.replace(Array(secret.utf8), in: bytes) }
        return CapturedBody(bytes: bytes, truncated: body.truncated)
    }

    /// `text` with every occurrence of each secret replaced by the mask. Secrets are expected longest first.
    func scrub(_ text: String, _ secrets: [String]) -> String {
        var result = text
        for secret in secrets where result.contains(secret) {
            result = result.replacingOccurrences(of: secret, with: Redactor.mask)
        }
        return result
    }

    static func replace(_ needle: [UInt8], in haystack: [UInt8]) -> [UInt8] {
        guard !needle.isEmpty, haystack.count >= needle.count else { return haystack }
        let mask = Array(Redactor.mask.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(haystack.count)
        var index = 0
        let first = needle[0]
        while index < haystack.count {
            if haystack[index] == first, index + needle.count <= haystack.count,
               haystack[index..<(index + needle.count)].elementsEqual(needle) {
                out.append(contentsOf: mask)
                index += needle.count
            } else {
                out.append(haystack[index])
                index += 1
            }
        }
        return out
    }
}
