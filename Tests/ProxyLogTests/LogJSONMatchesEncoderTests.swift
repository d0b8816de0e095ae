import Foundation
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyLog

/// The JSONL lines and HAR entries `JSONWriter` writes are the bytes `JSONEncoder.logLine()` writes for the same
/// `JSONLRecord` / `HAREntry`, up to the order of object members: JSONEncoder on Linux orders them by hash (a
/// different order per object and per run), the writer in declaration order. Every value's bytes (escapes, number
/// spelling, null versus absent) must be equal.
@Suite struct LogJSONMatchesEncoderTests {
    static func expectSame(writer: [UInt8], encoder: [UInt8], _ what: String) throws {
        let ours = try RawJSON.parse(writer)
        let theirs = try RawJSON.parse(encoder)
        let reordered = try #require(theirs.reordered(like: ours), "\(what): members differ\nwriter:  \(String(decoding: writer, as: UTF8.self))\nencoder: \(String(decoding: encoder, as: UTF8.self))")
        #expect(String(decoding: reordered.bytes, as: UTF8.self) == String(decoding: writer, as: UTF8.self), "\(what)")
    }

    static func check(_ flow: FlowRecord, _ what: String) throws {
        let encoder = JSONEncoder.logLine()
        var json = JSONWriter()
        json.jsonlRecord(flow)
        try expectSame(writer: json.bytes, encoder: Array(try encoder.encode(JSONLRecord(flow))), "JSONL \(what)")
        json.reset()
        json.harEntry(flow)
        try expectSame(writer: json.bytes, encoder: Array(try encoder.encode(HAREntry(flow))), "HAR \(what)")
    }

    @Test func samples() throws {
        for flow in Samples.all {
            try Self.check(flow, "sample \(flow.id)")
            try Self.check(Redactor().redact(flow), "redacted sample \(flow.id)")
            try Self.check(Redactor(logSecrets: true, redactQuery: ["token"]).redact(flow), "sample \(flow.id) --log-secrets")
        }
    }

    @Test func variedRecords() throws {
        var written = ""
        for flow in VariedFlows.all(count: 600) {
            try Self.check(flow, "varied \(flow.id)")
            let redacted = Redactor(redactQuery: ["token"]).redact(flow)
            try Self.check(redacted, "varied \(flow.id) redacted")
            for logged in [flow, redacted] { written += JSONLWriter.line(for: logged) + HARWriter.entryJSON(for: logged) }
        }
        // the records went through what they are meant to exercise
        for expected in [#"\u0000"#, #"\u001f"#, #"\b"#, #"\f"#, #"\t"#, #"\n"#, #"\r"#, #"\""#, #"\\"#, "/", "\u{7F}",
                         "😀", "\u{2028}", #""status":null"#, #""upstream_url":null"#, #""error":null"#, #""dns":null"#,
                         #"_encoding":"base64""#, #""encoding":"base64""#, #""comment":"hookproxy captured"#,
                         #""httpOnly":true"#, #""secure":true"#, #""domain":"#, #"<redacted>"#, #""hook":"trust""#, #""chain":[{"subject":"#, #""not_after":"#,
                         #""hop":3"#, #""request_body_size":9223372036854775807"#, #""id":922337203685477"#, #"1e+16"#,
                         #""connection":"#, #""redirectURL":"https://next"#, #""truncated":{"request":true"#,
                         #""response_trailers":[{"name":"#] {
            let found = written.contains(expected)
            #expect(found, "no record wrote \(expected)")
        }
    }

    /// The fuzz-logs seeds and regressions, decoded as the fuzz target does.
    @Test func fuzzInputs() throws {
        let fuzz = TestFiles.repoRoot.appendingPathComponent("Fuzz")
        var count = 0
        for directory in ["corpus/fuzz-logs", "regressions/fuzz-logs"] {
            let url = fuzz.appendingPathComponent(directory)
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path).sorted() {
                let input = FuzzLogsInput.decode(Array(try Data(contentsOf: url.appendingPathComponent(name))))
                let redactor = Redactor(logSecrets: input.logSecrets, redactQuery: input.redactQuery)
                try Self.check(input.flow, name)
                try Self.check(redactor.redact(input.flow), "\(name) redacted")
                count += 1
            }
        }
        #expect(count >= 7)
    }

    /// The writer's member order is the one the types declare, the same for every record.
    @Test func memberOrderIsDeclarationOrder() throws {
        for flow in Samples.all + VariedFlows.all(count: 50) {
            var json = JSONWriter()
            json.jsonlRecord(flow)
            // `websocket` is there only for an upgraded exchange, `response_trailers` only with trailers
            let keys = JSONLRecord.CodingKeys.allCases.map(\.stringValue).filter {
                ($0 != "websocket" || flow.webSocket != nil) && ($0 != "response_trailers" || flow.responseTrailers != nil)
            }
            #expect(try RawJSON.parse(json.bytes).keys == keys)
            json.reset()
            json.harEntry(flow)
            let entry = try RawJSON.parse(json.bytes)
            let expected = ["startedDateTime", "time", "request", "response", "cache", "timings"]
                + (flow.serverIP == nil ? [] : ["serverIPAddress"]) + (flow.connectionID == nil ? [] : ["connection"])
                + ["_hookproxy"]
            #expect(entry.keys == expected)
        }
    }

    /// The HAR header's creator version is a JSON string however it is spelled.
    @Test func harHeaderEscapesTheCreatorVersion() throws {
        let path = TestFiles.directory().appendingPathComponent("v.har").path
        let writer = try HARWriter(path: path, creatorVersion: "1.0 \"beta\"/\\\u{1}é")
        writer.close()
        let log = try #require(try TestFiles.json(path)["log"] as? [String: Any])
        #expect((log["creator"] as? [String: String])?["version"] == "1.0 \"beta\"/\\\u{1}é")
    }
}
