import FoundationEssentials
import ProxyModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a HAR file into the requests a replay sends, in file order.
///
/// Every entry is checked before anything is sent: a file that is not JSON, not a HAR, or holds an entry without a
/// method, a URL or a status, an invalid header or an undecodable body is a `ReplayInputError` naming the entry.
/// Hops after the first of a redirect that hookproxy followed (`_hookproxy.hop` > 0) are not sent: they belong to
/// the chain of the hop-0 entry before them from the same client, whose recorded outcome becomes the last hop's. A
/// hop without that entry before it (a filtered export) is sent in its place.
public enum HARReader {
    public static func load(path: String) throws(ReplayInputError) -> [ReplayEntry] {
        let data = try read(path)
        let document: HARDocument
        do {
            document = try JSONDecoder().decode(HARDocument.self, from: data)
        } catch let error as DecodingError {
            if case .dataCorrupted(let context) = error, context.codingPath.isEmpty {
                throw ReplayInputError(path: path, problem: "it is not valid JSON: \(syntaxError(in: data))")
            }
            throw describe(error, path: path)
        } catch {
            throw ReplayInputError(path: path, problem: "cannot decode it: \(error)")
        }
        return try entries(document.log.entries, path: path)
    }

    static func read(_ path: String) throws(ReplayInputError) -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw ReplayInputError(path: path, problem: "cannot read it: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw ReplayInputError(path: path, problem: "it is a directory, not a HAR file")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReplayInputError(path: path, problem: "cannot read it: \(String(cString: strerror(errno)))")
            }
            bytes.append(contentsOf: chunk[..<count])
        }
        let data = Data(bytes)
        if data.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            throw ReplayInputError(path: path, problem: "it is empty, not a HAR file")
        }
        return data
    }

    /// Where the JSON breaks, as `line L, column C: <parser's words>` (JSONDecoder does not say; the parser
    /// reports a character offset, turned here into a line and column, both 1-based).
    static func syntaxError(in data: Data) -> String {
        guard let detail = JSONCheck(data).problem else { return "the JSON parser gave no reason" }
        // (the first `character N`, N its offset in bytes)
        guard let offset = detail.ranges(of: "character ").lazy
            .compactMap({ Int(detail[$0.upperBound...].prefix { $0.isASCII && $0.isNumber }) }).first else {
            let lines = data.count(where: { $0 == UInt8(ascii: "\n") }) + (data.last == UInt8(ascii: "\n") ? 0 : 1)
            return "\(detail) (at the end, line \(lines): was the file cut off?)"
        }
        var line = 1, column = 1
        for byte in data.prefix(offset) {
            if byte == UInt8(ascii: "\n") { line += 1; column = 1 } else if byte & 0xC0 != 0x80 { column += 1 }
        }
        var words = detail
        // without ` around character N.`
        for around in detail.ranges(of: " around character ").reversed() {
            var end = words[around.upperBound...].firstIndex { !($0.isASCII && $0.isNumber) } ?? words.endIndex
            guard end > around.upperBound else { continue }
            if end < words.endIndex, words[end] == "." { end = words.index(after: end) }
            words.removeSubrange(around.lowerBound..<end)
        }
        return "line \(line), column \(column): \(words)"
    }

    /// The decoder's complaint in the file's terms: which entry, which field, what was expected.
    static func describe(_ error: DecodingError, path: String) -> ReplayInputError {
        switch error {
        case .dataCorrupted(let context):
            return located(context.codingPath, path: path) { "\($0) is invalid: \(context.debugDescription)" }
        case .keyNotFound(let key, let context):
            let full = context.codingPath + [key]
            if full.count == 1 { return ReplayInputError(path: path, problem: "it is not a HAR file: no \"log\" object at the top") }
            return located(full, path: path) { "\($0) is missing" }
        case .typeMismatch(let type, let context):
            if context.codingPath.isEmpty {
                return ReplayInputError(path: path, problem: "it is not a HAR file: the top level is not an object with \"log\"")
            }
            return located(context.codingPath, path: path) { "\($0) must be \(kind(type))" }
        case .valueNotFound(let type, let context):
            return located(context.codingPath, path: path) { "\($0) is null, expected \(kind(type))" }
        @unknown default:
            return ReplayInputError(path: path, problem: "\(error)")
        }
    }

    /// `log.entries[3].request.url` → entry 4, "request.url".
    private static func located(_ codingPath: [any CodingKey], path: String,
                                _ problem: (String) -> String) -> ReplayInputError {
        var entry: Int?
        var rest = codingPath[...]
        if codingPath.count >= 3, codingPath[1].stringValue == "entries", let index = codingPath[2].intValue {
            entry = index + 1
            rest = codingPath.dropFirst(3)
        }
        var field = ""
        for key in rest {
            if let index = key.intValue { field += "[\(index)]" } else { field += (field.isEmpty ? "" : ".") + key.stringValue }
        }
        if entry != nil && field.isEmpty { field = "the entry" }
        if entry == nil { field = codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".") }
        return ReplayInputError(path: path, entry: entry, problem: problem(field))
    }

    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }

    /// Entries to requests, redirect hops folded into their chain.
    static func entries(_ entries: [HARDocument.Entry], path: String) throws(ReplayInputError) -> [ReplayEntry] {
        var result: [ReplayEntry] = []
        // The chain each client's last hop-0 entry started: its index in `result`, the last hop seen, and whether
        // that hop's response was a redirect (only then can a later hop belong to it).
        var chains: [String: (index: Int, hop: Int, redirected: Bool)] = [:]
        for (offset, entry) in entries.enumerated() {
            let number = offset + 1
            let hop = entry.hookproxy?.hop ?? 0
            let client = entry.hookproxy?.client ?? ""
            let recorded = ReplayEntry.Recorded(
                status: entry.response.status,
                size: max(-1, entry.response.content?.size ?? entry.response.bodySize ?? -1))
            let redirected = ReplayEntry.isRedirect(recorded.status)
            // A later hop of a redirect hookproxy followed: the rules follow it again when its chain is sent. (Hops
            // left out of the file in between do not break the chain.) A hop whose chain is not in the file (a
            // filtered export) is sent as the chain's first: the hops after it fold into it. A chain whose last hop
            // was answered without a redirect has ended: a later hop starts another.
            if hop > 0, let chain = chains[client], chain.hop < hop, chain.redirected {
                result[chain.index].recorded = recorded
                chains[client] = (chain.index, hop, redirected)
                continue
            }
            do throws(EntryProblem) {
                result.append(try request(entry, number: number, recorded: recorded))
            } catch {
                throw ReplayInputError(path: path, entry: number, problem: error.message)
            }
            if !client.isEmpty { chains[client] = (result.count - 1, hop, redirected) }
        }
        return result
    }

    struct EntryProblem: Error { var message: String }

    static func request(_ entry: HARDocument.Entry, number: Int,
                        recorded: ReplayEntry.Recorded) throws(EntryProblem) -> ReplayEntry {
        let request = entry.request
        guard HTTPToken.isToken(request.method) else {
            throw EntryProblem(message: "request.method '\(request.method.prefix(40))' is not an HTTP method")
        }
        var replay = ReplayEntry(number: number, method: request.method, url: request.url, recorded: recorded)
        let scheme = request.url.firstRange(of: "://").map { request.url[..<$0.lowerBound].lowercased() }
        guard scheme == "http" || scheme == "https" else {
            replay.disposition = .skipped("not an http(s) URL")
            return replay
        }
        guard ProxyURL(string: request.url) != nil else {
            throw EntryProblem(message: "request.url '\(request.url.prefix(200))' is not a valid http(s) URL")
        }
        guard !request.url.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw EntryProblem(message: "request.url holds a line break or another control character (percent-encode it)")
        }
        // What no request target may hold (RFC 3986): sent as it is, the request line would be refused.
        guard !request.url.utf8.contains(where: { $0 == 0x20 || $0 >= 0x80 || $0 == UInt8(ascii: "\\") }) else {
            throw EntryProblem(message: "request.url holds a space, a backslash or a character outside ASCII (percent-encode it)")
        }
        let recordedHeaders = request.headers ?? []
        for (index, field) in recordedHeaders.enumerated() {
            let name = field.name.hasPrefix(":") ? String(field.name.dropFirst()) : field.name
            guard HTTPToken.isToken(name) else {
                throw EntryProblem(message: "request.headers[\(index)].name '\(field.name.prefix(40))' is not a header name")
            }
            guard !HTTPToken.breaksFieldValue(field.value) else {
                throw EntryProblem(message: "request.headers[\(index)] (\(field.name)) holds a line break or NUL")
            }
        }
        let body = try body(request)
        var headers = HeaderFields(recordedHeaders.filter { !$0.name.hasPrefix(":") }
            .map { HeaderField(name: $0.name, value: $0.value) })
        if entry.resourceType == "websocket" || headers.contains("Upgrade") {
            replay.disposition = .skipped("a protocol upgrade (\(headers["Upgrade"] ?? "websocket")) is not replayed")
            return replay
        }
        let framed = headers.contains("Content-Length") || headers.contains("Transfer-Encoding")
        HopByHop.strip(&headers)
        headers.remove("Host")
        headers.remove("Content-Length")
        headers.removeAll { $0.name.caseInsensitiveEquals("Via") && $0.value.contains("hookproxy-") }
        replay.redactedHeaders = headers.filter { $0.value == redacted }.map(\.name)
        headers.removeAll { $0.value == redacted }
        if !body.isEmpty || framed { headers.add("Content-Length", String(body.count)) }
        replay.headers = headers
        replay.body = body
        if request.url.contains(redacted) {
            replay.disposition = .notReplayable("its URL holds a \(redacted) value (recorded with --redact-query or a password in the URL)")
        } else if entry.hookproxy?.truncated?.request == true {
            let size = request.bodySize.map { " \($0)-byte" } ?? ""
            replay.disposition = .notReplayable("the HAR holds only the first \(body.count) bytes of its\(size) request body (record with a larger --capture-limit)")
        } else if request.postData?.text == nil, let size = request.bodySize, size > 0 {
            replay.disposition = .notReplayable("the HAR holds no text for its \(size)-byte request body")
        }
        return replay
    }

    static let redacted = "<redacted>"

    /// The request body: `postData.text`, base64-decoded when its encoding says so.
    static func body(_ request: HARDocument.Request) throws(EntryProblem) -> [UInt8] {
        guard let postData = request.postData, let text = postData.text else { return [] }
        let encoding = (postData.hookproxyEncoding ?? postData.encoding ?? "").lowercased()
        switch encoding {
        case "":
            return Array(text.utf8)
        case "base64":
            // Line breaks and spaces (some writers wrap base64) are dropped; any other stray character is an error,
            // never skipped: "aGVsbG8=!!garbage" is not "hello", and "!!!!" is not an empty body.
            let compact = String(text.unicodeScalars.filter { !" \t\r\n".unicodeScalars.contains($0) })
            guard let data = Data(base64Encoded: compact) else {
                throw EntryProblem(message: "request.postData.text is not valid base64 (its encoding says base64)")
            }
            return Array(data)
        default:
            throw EntryProblem(message: "request.postData encoding '\(encoding)' is unknown (only base64 is)")
        }
    }
}
