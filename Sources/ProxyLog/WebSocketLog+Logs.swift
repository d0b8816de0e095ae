import FoundationEssentials
import ProxyModel

/// How a WebSocket session appears in the files: the JSONL `websocket` object and HAR's `_webSocketMessages`
/// (as Chromium's devtools write them). Text messages are written as text, binary ones as base64.
struct WebSocketMessageJSON: Encodable {
    var direction: String
    var time: String
    /// HAR's `time`: epoch seconds.
    var epochSeconds: Double
    var opcode: Int
    var size: Int
    var data: String
    var truncated: Bool

    init(_ message: WebSocketLog.Message) {
        direction = message.direction.rawValue
        time = Timestamp.iso8601(message.time)
        epochSeconds = (message.time.timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000
        opcode = message.opcode
        size = message.size
        if message.opcode == 1 {
            data = String(decoding: message.data, as: UTF8.self)
        } else {
            data = Base64.encode(message.data)
        }
        truncated = message.truncated
    }

    enum CodingKeys: String, CodingKey { case direction, time, opcode, size, data, truncated }

    /// JSONL: `{direction, time, opcode, size, data, truncated}`.
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(direction, forKey: .direction)
        try c.encode(time, forKey: .time)
        try c.encode(opcode, forKey: .opcode)
        try c.encode(size, forKey: .size)
        try c.encode(data, forKey: .data)
        try c.encode(truncated, forKey: .truncated)
    }

    func writeJSONL(into json: inout JSONWriter) {
        json.beginObject()
        json.field("direction", direction)
        json.field("time", time)
        json.field("opcode", opcode)
        json.field("size", size)
        json.field("data", data)
        json.field("truncated", truncated)
        json.endObject()
    }

    /// HAR: `{type: send|receive, time: <epoch seconds>, opcode, data}`.
    func writeHAR(into json: inout JSONWriter) {
        json.beginObject()
        json.field("type", direction)
        json.field("time", epochSeconds)
        json.field("opcode", opcode)
        json.field("data", data)
        json.endObject()
    }
}

/// JSONL's `websocket` object: the protocol, the messages, the counts and how the session closed.
struct WebSocketJSON: Encodable {
    struct Close: Encodable { var code: Int?; var reason: String; var by: String }
    var protocolName: String
    var messages: [WebSocketMessageJSON]
    var close: Close?
    var sent: Int, sentBytes: Int, received: Int, receivedBytes: Int

    init(_ log: WebSocketLog) {
        protocolName = log.protocolName
        messages = log.messages.map(WebSocketMessageJSON.init)
        close = log.close.map { Close(code: $0.code, reason: $0.reason, by: $0.by.rawValue) }
        sent = log.sentMessages
        sentBytes = log.sentBytes
        received = log.receivedMessages
        receivedBytes = log.receivedBytes
    }

    enum CodingKeys: String, CodingKey {
        case protocolName = "protocol", messages, close, sent, sentBytes = "sent_bytes", received
        case receivedBytes = "received_bytes"
    }

    func write(into json: inout JSONWriter) {
        json.beginObject()
        json.field("protocol", protocolName)
        json.field("messages", array: messages) { json, message in message.writeJSONL(into: &json) }
        json.key("close")
        if let close {
            json.beginObject()
            json.field("code", close.code)
            json.field("reason", close.reason)
            json.field("by", close.by)
            json.endObject()
        } else {
            json.null()
        }
        json.field("sent", sent)
        json.field("sent_bytes", sentBytes)
        json.field("received", received)
        json.field("received_bytes", receivedBytes)
        json.endObject()
    }
}
