internal import CCurl
import Glibc
import ProxyModel

/// The curl side of one request carried upstream by libcurl: its easy handle, pause state and header parsing.
/// Created by `UpstreamEngine.start` and handed to its event loop's `LoopEngine`, which alone touches it from then
/// on; the caller keeps only the `UpstreamTransfer` handle. It crosses threads at most once, fresh, when `start` is
/// called off the loop (`@unchecked Sendable` for that one move).
final class CurlTransfer: @unchecked Sendable {
    let id: UInt64
    let request: UpstreamRequest
    let delegate: any UpstreamTransferDelegate

    // MARK: loop state
    var easy: CurlEasy?
    var state: TransferState = .waiting
    var headParser = ResponseHeadParser()
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: hp_error_size() + 1)
    var events: [HookEvent] = []
    var recordedError: ProxyError?
    /// The TLS connection whose close ends this response's body (`CloseNotifyLedger`), once the head said so.
    var closeDelimitedOverTLS: UInt?
    /// The upstream proxy's answers to this transfer's CONNECTs so far; nil when it does not tunnel through one.
    var proxyConnect: ProxyConnectHeads?
    /// Set for a connect-only transfer (`UpstreamEngine.connect`): who gets the connection once curl made it.
    var connectionDelegate: (any UpstreamConnectionDelegate)?

    /// The local port of the connection curl gave this transfer (CURLOPT_PREREQFUNCTION, set by `LoopEngine`), 0
    /// before it has one: how the engine tells which cached connection a transfer took.
    var connectionPort = 0
    /// The engine running this transfer (it outlives the transfer: `stop` removes every one first).
    unowned(unsafe) var engine: LoopEngine?
    /// The engine lets this HTTP/2 transfer pause: no other transfer shares its connection (`LoopEngine.mayPauseAlone`).
    var pausesAlone = false
    /// How long the upstream has been silent (`--idle-timeout`), checked in curl's progress callback.
    var idleClock = UpstreamIdleClock()

    init(id: UInt64, request: UpstreamRequest, delegate: any UpstreamTransferDelegate) {
        self.id = id
        self.request = request
        self.delegate = delegate
        errorBuffer.initialize(repeating: 0, count: hp_error_size() + 1)
    }

    deinit {
        errorBuffer.deallocate()
        if let closeDelimitedOverTLS { CloseNotifyLedger.forget(closeDelimitedOverTLS) }
    }

    var host: String { request.head.url.authority }

    /// ` (through upstream proxy NAME)` after the host in an error message, or nothing without `--upstream-proxy`.
    var throughUpstreamProxy: String {
        request.settings.upstreamProxyName.map { " (through upstream proxy \($0))" } ?? ""
    }

    /// Whether libcurl may answer a 401/407 itself and send the request again: the rule says `use_credential`, or an
    /// upstream proxy may ask for its credentials.
    var mayAnswerChallenges: Bool {
        request.challenge?.action == .useCredential || !(request.settings.upstreamProxy ?? "").isEmpty
    }

    /// Whether curl opens a CONNECT tunnel through the upstream proxy: for TLS to the server, or for a connection
    /// handed over (whatever the scheme).
    var tunnelsThroughProxy: Bool {
        guard !(request.settings.upstreamProxy ?? "").isEmpty else { return false }
        let scheme = request.head.url.scheme
        return request.connectOnly || scheme == "https" || scheme == "wss"
    }

    /// The target a message about the upstream proxy names: the CONNECT's `host:port` when tunnelling, else `host`.
    var proxyTarget: String {
        tunnelsThroughProxy && request.head.url.isDefaultPort ? "\(host):\(request.head.url.port)" : host
    }

    /// Whether curl speaks TLS on the connection: to the server (https, wss) or to an https upstream proxy. Only a
    /// connection without it can be handed to NIO (OpenSSL's session state lives in curl).
    var hasTLS: Bool {
        let scheme = request.head.url.scheme
        if scheme == "https" || scheme == "wss" { return true }
        guard let proxy = request.settings.upstreamProxy, !proxy.isEmpty else { return false }
        return proxy.lowercased().hasPrefix("https://")
    }
}

/// Where a transfer is in its life (its loop only).
enum TransferState {
    case waiting
    case running(paused: Bool)
    case finished
}

/// Collects header lines from CURLOPT_HEADERFUNCTION into a ResponseHead. Informational (1xx) responses and
/// intermediate auth rounds start over at their own status line; the head in force is the last one completed. A
/// completed 1xx other than 101 waits in `informational` until taken: a proxy forwards them (RFC 9110 §15.2).
struct ResponseHeadParser {
    private(set) var current: ResponseHead?
    /// The last 1xx head completed and not yet taken (`takeInformational`).
    private var informational: ResponseHead?
    private(set) var complete = false
    private(set) var delivered = false
    /// 401/407 heads that a later response replaced (curl answered the challenge).
    private(set) var answeredChallenges = 0
    /// Fields curl reports after the delivered head: the response's trailers (HTTP/2, or HTTP/1.1 chunked).
    private(set) var trailers: HeaderFields?

    /// Feeds one raw header line (with CRLF). Returns true when it ended the head of a final response.
    /// Works on the bytes: only the name and the value become Strings.
    mutating func feed(_ line: UnsafeRawBufferPointer) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if delivered && complete {
            // After the final head: trailer fields, then a blank line.
            if end > 0, let (name, value) = ResponseHeadParser.field(line, end: end) {
                if trailers == nil { trailers = HeaderFields() }
                trailers!.add(name, value)
            }
            return false
        }
        if end == 0 {
            guard let current else { return false }
            if (100..<200).contains(current.status) && current.status != 101 {
                informational = current
                self.current = nil
                return false
            }
            complete = true
            return true
        }
        // "HTTP/" in any case, as libcurl reads a status line (`http/1.1 200 OK` came with no head at all, and its
        // 502 said the upstream had closed before a complete one). No header line starts so: `/` is no token byte.
        if end >= 5, line[0] | 0x20 == 0x68, line[1] | 0x20 == 0x74, line[2] | 0x20 == 0x74, line[3] | 0x20 == 0x70,
           line[4] == 0x2F {
            if complete, let status = current?.status, status == 401 || status == 407 { answeredChallenges += 1 }
            let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])
            current = ResponseHeadParser.plainStatusLine(bytes)
                ?? ResponseHeadParser.statusLine(String(decoding: bytes, as: UTF8.self))
            complete = false
            return false
        }
        guard current != nil else { return false }
        if line[0] == 0x20 || line[0] == 0x09 {
            // obsolete line folding: append to the previous value
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<end]), as: UTF8.self)
            if let last = current!.headers.indices.last {
                var fields = Array(current!.headers)
                fields[last].value += " " + text.trimmingSpaces()
                current!.headers = HeaderFields(fields)
            }
            return false
        }
        guard let (name, value) = ResponseHeadParser.field(line, end: end) else { return false }
        current!.headers.add(name, value)
        return false
    }

    /// `Name: value` of a header line (without its CRLF, `end` bytes long); nil without a colon.
    private static func field(_ line: UnsafeRawBufferPointer, end: Int) -> (String, String)? {
        guard let colon = (0..<end).first(where: { line[$0] == 0x3A }) else { return nil }
        var valueStart = colon + 1
        while valueStart < end, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
        var valueEnd = end
        while valueEnd > valueStart, line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        return (String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self),
                String(decoding: UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd]), as: UTF8.self))
    }

    /// The 1xx head a blank line just completed, once.
    mutating func takeInformational() -> ResponseHead? {
        guard let head = informational else { return nil }
        informational = nil
        return head
    }

    /// Whether a complete 401/407 head waits, not handed on (libcurl may answer it, reading its body meanwhile).
    var holdsAnsweredChallenge: Bool {
        guard complete, !delivered, let status = current?.status else { return false }
        return status == 401 || status == 407
    }

    /// Makes sure the head in force is never handed on (the transfer is being failed instead).
    mutating func withhold() {
        delivered = true
    }

    /// The head to hand to the client, once: when complete (or whatever arrived when the transfer ended).
    mutating func takeForDelivery() -> ResponseHead? {
        guard !delivered, let current else { return nil }
        delivered = true
        return current
    }

    /// `HTTP/1.1 200 OK`, `HTTP/1.0 …`, `HTTP/2 …` or `HTTP/3 …` with one space on each side of a three-digit code:
    /// nearly every status line, read off its bytes. Nil for anything else, which `statusLine` reads.
    static func plainStatusLine(_ line: UnsafeRawBufferPointer) -> ResponseHead? {
        let version: HTTPVersionNumber
        let codeStart: Int
        if line.count >= 12, line[5] == UInt8(ascii: "1"), line[6] == UInt8(ascii: "."), line[8] == 0x20,
           line[7] == UInt8(ascii: "1") || line[7] == UInt8(ascii: "0") {
            version = HTTPVersionNumber(major: 1, minor: Int(line[7] - UInt8(ascii: "0")))
            codeStart = 9
        } else if line.count >= 10, line[5] == UInt8(ascii: "2") || line[5] == UInt8(ascii: "3"), line[6] == 0x20 {
            version = HTTPVersionNumber(major: Int(line[5] - UInt8(ascii: "0")), minor: 0)
            codeStart = 7
        } else {
            return nil
        }
        var status = 0
        for byte in line[codeStart..<codeStart + 3] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            status = status * 10 + Int(byte - 0x30)
        }
        let codeEnd = codeStart + 3
        if codeEnd == line.count { return ResponseHead(status: status, reason: "", version: version) }
        guard line[codeEnd] == 0x20 else { return nil }
        let reason = String(decoding: UnsafeRawBufferPointer(rebasing: line[(codeEnd + 1)...]), as: UTF8.self)
        return ResponseHead(status: status, reason: reason, version: version)
    }

    /// Splits at space bytes, as HTTP does: splitting the String at Characters made a space followed by a combining
    /// mark (`200 \u{301}OK`, legal obs-text in a reason) no separator at all.
    static func statusLine(_ text: String) -> ResponseHead {
        let parts = text.utf8.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: true).map { Substring($0) }
        var version = HTTPVersionNumber.http1_1
        if let v = parts.first?.dropFirst(5) {
            let numbers = v.split(separator: ".")
            version = HTTPVersionNumber(major: Int(numbers.first ?? "1") ?? 1, minor: numbers.count > 1 ? Int(numbers[1]) ?? 0 : 0)
        }
        // three digits or nothing: `HTTP/2 -1` reaches here through libcurl, and a negative code trapped later
        let code = parts.count > 1 ? parts[1] : ""
        let status = code.utf8.count == 3 && code.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) ? Int(code) ?? 0 : 0
        let reason = parts.count > 2 ? String(parts[2]) : ""
        return ResponseHead(status: status, reason: reason, version: version)
    }
}
