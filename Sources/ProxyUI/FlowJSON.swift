import ProxyLog
import ProxyModel

/// The API's JSON for flows: a flow is the JSONL record of `--jsonl` (same keys, redacted the same way) with
/// `state` added (its `id` is the record's). Pure; called on whichever event loop serves the request.
public enum FlowJSON {
    /// `{"state":"done","id":…,…every JSONL key…}` of an already redacted record. Without bodies, the body keys are
    /// null and `truncated` false (the list and the event stream leave bodies to `/api/flows/ID`).
    public static func object(_ redacted: FlowRecord, state: String, bodies: Bool = true) -> [UInt8] {
        var record = redacted
        if !bodies {
            record.requestBody = nil
            record.responseBody = nil
        }
        let line = JSONLWriter.lineBytes(for: record)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(line.count + 24)
        bytes.append(contentsOf: #"{"state":"#.utf8)
        appendString(state, to: &bytes)
        bytes.append(UInt8(ascii: ","))
        line.withUnsafeBufferPointer { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0.dropFirst())) }
        return bytes
    }

    /// `[flow,flow,…]`.
    public static func array(_ objects: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        bytes.reserveCapacity(objects.reduce(2) { $0 + $1.count + 1 })
        for (index, object) in objects.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: object)
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// A HAR 1.2 document of already redacted records, entries as `--har` writes them (`_hookproxy` included), made
    /// at once: what `FlowDownload` (the API's download, made in parts) adds up to.
    public static func har(_ redacted: [FlowRecord], creatorVersion: String) -> [UInt8] {
        var bytes = Array(#"{"log":{"version":"1.2","creator":{"name":"hookproxy","version":"#.utf8)
        appendString(creatorVersion, to: &bytes)
        bytes.append(contentsOf: Array(#"},"entries":["#.utf8))
        for (index, flow) in redacted.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: HARWriter.entryJSON(for: flow).utf8)
        }
        bytes.append(contentsOf: Array("]}}".utf8))
        return bytes
    }

    /// `{"error":"…"}`.
    public static func error(_ message: String) -> [UInt8] {
        var bytes = Array(#"{"error":"#.utf8)
        appendString(message, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// A JSON string literal: `"` `\` and control characters escaped, everything else as UTF-8.
    public static func appendString(_ string: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [92, 110])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [92, 114])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [92, 116])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
