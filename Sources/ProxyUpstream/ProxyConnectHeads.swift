/// The heads an upstream proxy answers a CONNECT with, fed line by line from curl's header callback, before the
/// tunnel carries anything. libcurl answers a Digest 407 marked `stale=true` again and again (and a CONNECT's 407
/// never reaches the request's own head parser), so a proxy that calls every nonce stale would get thousands of
/// CONNECTs until curl's cap on all heads ends them. After `CurlTransfer.maxAuthRounds` answered 407s this says
/// stop, as a plain request's 401/407 rounds do. Owned by the thread running the transfer.
struct ProxyConnectHeads {
    private var status = 0
    private var offered: String?
    /// 407 heads curl answered (a later head followed).
    private(set) var answered = 0
    /// curl's counters at the server's last header line: its pretransfer time and connections made.
    private var pretransferAtServer: Int64 = 0
    private var connectsAtServer = 0

    /// Whether a header line is the proxy's answer to a CONNECT rather than the server's, from curl's counters read
    /// as it arrives: a connection was made since the server's last line (a transfer on a reused connection sees no
    /// CONNECT), and the request has not been sent on it (pretransfer time unchanged: 0 at first, and still the
    /// previous round's when an answered challenge opens a new tunnel).
    mutating func isConnectLine(pretransferMicros: Int64, connects: Int) -> Bool {
        if connects > connectsAtServer && pretransferMicros == pretransferAtServer { return true }
        pretransferAtServer = pretransferMicros
        connectsAtServer = connects
        return false
    }

    /// Feeds one raw header line (with CRLF). false: the proxy asked for credentials once more after
    /// `CurlTransfer.maxAuthRounds` answers; `stopReason` says so.
    mutating func feed(_ line: UnsafeRawBufferPointer) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if end == 0 {  // the head is complete
            guard status == 407 else { return true }
            guard answered < CurlTransfer.maxAuthRounds else { return false }
            answered += 1
            return true
        }
        if end > 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
           line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
            status = Self.status(line, end: end)
            offered = nil
        } else if status == 407, offered == nil, let value = Self.value(of: "proxy-authenticate", in: line, end: end) {
            offered = value
        }
        return true
    }

    /// Why `feed` said stop, for the message a user reads.
    var stopReason: String {
        "it asked for credentials again after \(answered) answers (407 \(offered ?? "no scheme offered"))"
    }

    /// The three digits after the status line's first space (0 when there are none).
    private static func status(_ line: UnsafeRawBufferPointer, end: Int) -> Int {
        guard let space = line[..<end].firstIndex(of: UInt8(ascii: " ")), space + 3 <= end else { return 0 }
        var code = 0
        for byte in line[(space + 1)..<(space + 4)] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            code = code * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return code
    }

    /// The value (at most 200 bytes, trimmed) when the line is the field `name` (lower-case), else nil.
    private static func value(of name: String, in line: UnsafeRawBufferPointer, end: Int) -> String? {
        let utf8 = name.utf8
        guard end > utf8.count, line[utf8.count] == UInt8(ascii: ":") else { return nil }
        for (index, byte) in utf8.enumerated() where line[index] | 0x20 != byte { return nil }
        var start = utf8.count + 1
        while start < end, line[start] == UInt8(ascii: " ") || line[start] == UInt8(ascii: "\t") { start += 1 }
        let stop = min(end, start + 200)
        return String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<stop]), as: UTF8.self)
    }
}
