import ProxyModel

/// Makes an upstream response head safe to forward: its framing must describe exactly the bytes the client will
/// get, and every field must be one the client can parse as the proxy meant it.
///
/// libcurl de-chunks a chunked body and hands hookproxy the bare bytes; the client gets them re-framed by NIO's
/// encoder (chunked for HTTP/1.1, close-delimited for 1.0) unless a single, valid Content-Length remains. So:
/// - `Transfer-Encoding: chunked` (with or without Content-Length): every Content-Length goes, because curl did not
///   honour it (RFC 9112 §6.3: Transfer-Encoding overrides Content-Length); any other transfer coding: 502;
/// - several Content-Length values that differ, or one that is not a number: the framing is invalid, and a proxy
///   must answer 502 and drop the upstream connection (RFC 9112 §6.3, item 5);
/// - equal repeated values (`Content-Length: 5, 5`): kept as one;
/// - a field name that is not a token, or a value holding a control character (CR, LF, NUL, DEL, …; RFC 9110 §5.5):
///   502, never forwarded; a reason phrase holding one is replaced by the standard one.
/// A pure function of the head; any thread.
enum ResponseFraming {
    /// Rewrites `head` in place; returns why it cannot be forwarded at all (then nothing was changed that matters).
    static func sanitize(_ head: inout ResponseHead) -> String? {
        guard (100...999).contains(head.status) else { return "invalid status line (no three-digit status code)" }
        for field in head.headers {
            if !HTTPToken.isToken(field.name) { return "invalid header name '\(printable(field.name))'" }
            if HTTPToken.hasControlCharacter(field.value) {
                return HTTPToken.breaksFieldValue(field.value) ? "invalid value of header '\(field.name)' (CR, LF or NUL)"
                    : "invalid value of header '\(field.name)' (a control character)"
            }
        }
        // The reason phrase is a courtesy (RFC 9112 §4): one with a control character gets the standard one.
        if HTTPToken.hasControlCharacter(head.reason) { head.reason = ResponseHead.standardReason(for: head.status) }
        if head.headers.contains("transfer-encoding") {
            // libcurl decodes only `chunked`: with another coding the client would get coded bytes as the content
            // (`gzip, chunked`: raw gzip), or an empty answer (chunked not last, RFC 9112 §6.3).
            let sent = head.headers.values(for: "transfer-encoding")
            let codings = sent.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces().asciiLowercased() }
                .filter { !$0.isEmpty && $0 != "identity" }
            guard codings == ["chunked"] else {
                return "Transfer-Encoding '\(printable(sent.joined(separator: ", ")))' (hookproxy decodes chunked only)"
            }
            head.headers.remove("content-length")
            return nil
        }
        let declared = head.headers.values(for: "content-length")
        guard !declared.isEmpty else { return nil }
        // The usual case, one plain number without a leading zero, is already in the form forwarded.
        if declared.count == 1, isPlainNumber(declared[0]) { return nil }
        var length: String?
        for value in declared {
            for part in value.split(separator: ",", omittingEmptySubsequences: false) {
                let number = part.trimmingSpaces()
                guard !number.isEmpty, number.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), number.utf8.count <= 18 else {
                    return "invalid Content-Length '\(printable(value))'"
                }
                let normalized = String(Int(number) ?? 0)
                if let length, length != normalized { return "conflicting Content-Length values (\(declared.joined(separator: ", ")))" }
                length = normalized
            }
        }
        if let length, declared.count > 1 || declared[0] != length { head.headers.set("Content-Length", length) }
        return nil
    }

    /// 1 to 18 digits, the first not a 0 unless it is the only one: what normalizing would give back unchanged.
    private static func isPlainNumber(_ value: String) -> Bool {
        let digits = value.utf8
        guard let first = digits.first, digits.count <= 18, first != UInt8(ascii: "0") || digits.count == 1 else {
            return false
        }
        return digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    private static func printable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(80).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }
}
