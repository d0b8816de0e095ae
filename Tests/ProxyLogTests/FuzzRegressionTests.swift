import Foundation
import ProxyModel
import ProxyTestSupport
import Testing
@testable import ProxyLog

/// Inputs the `fuzz-logs` fuzz target (Fuzz/, `make fuzz`) crashed on, kept in Fuzz/regressions/fuzz-logs/, fed
/// through the target's path: the record the input describes, `Redactor.redact`, the HAR entry and the JSONL line
/// (which must parse back as JSON objects).
@Suite struct FuzzLogsRegressionTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/regressions/fuzz-logs")

    static func input(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    /// What `fuzz-logs` does with one input (Fuzz/Sources/fuzz-logs/Fuzz.swift).
    static func run(_ bytes: [UInt8]) throws {
        let input = FuzzLogsInput.decode(bytes)
        let redactor = Redactor(logSecrets: input.logSecrets, redactQuery: input.redactQuery)
        let flow = redactor.redact(input.flow)
        let encoder = JSONEncoder.logLine()
        _ = try encoder.encode(HAREntry(flow))
        _ = try encoder.encode(JSONLRecord(flow))
        for json in [HARWriter.entryJSON(for: flow), JSONLWriter.line(for: flow)] {
            let object = try JSONSerialization.jsonObject(with: Data(json.utf8))
            #expect(object is [String: Any])
        }
        #expect(!JSONLWriter.line(for: flow).contains("\n"))
        _ = ConsoleLog.line(for: flow, color: true, utc: true)
        _ = ConsoleLog.headerLines(for: flow)
    }

    /// `K0\0`: a secret value holding U+0000 ("0\0"); the client address "127.0.0.1:50000" holds its "0".
    /// `Redactor.scrub` trapped: Foundation's `contains` said yes, then `replacingOccurrences(of:with:)` trapped
    /// (Redactor.swift:102-103 up to 23bd2d4). Fixed by 76a00d3 (redaction by position).
    @Test
    func secretWithNULInClient() throws {
        try Self.run(try Self.input("secret-with-nul-in-client.txt"))
    }

    /// `Ks\0` and an event whose action is "s": the same trap through the events' scrubbing.
    @Test
    func secretWithNULInEvent() throws {
        try Self.run(try Self.input("secret-with-nul-in-event.txt"))
    }

    /// URL "\r" and the secret "\r\0": the same trap through `Redactor.url`.
    @Test
    func secretWithNULInURL() throws {
        try Self.run(try Self.input("secret-with-nul-in-url.txt"))
    }

    /// The seed corpus of `fuzz-logs` goes through the same path without trouble.
    @Test func seedCorpus() throws {
        let seeds = Self.directory.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("corpus/fuzz-logs")
        let names = try FileManager.default.contentsOfDirectory(atPath: seeds.path).sorted()
        #expect(!names.isEmpty)
        for name in names { try Self.run(Array(try Data(contentsOf: seeds.appendingPathComponent(name)))) }
    }
}
