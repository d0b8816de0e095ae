import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

@Suite struct JSONLWriterTests {
    static let keys: Set<String> = [
        "id", "start", "client", "method", "url", "upstream_url", "http_version", "upstream_http_version", "status", "request_headers",
        "response_headers", "request_body_size", "response_body_size", "request_body", "request_body_encoding",
        "response_body", "response_body_encoding", "truncated", "timings", "rules", "events", "error", "hop",
    ]

    static func lines(_ path: String) throws -> [[String: Any]] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        return try text.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    @Test func everyLineParsesAndCarriesEveryKey() throws {
        let path = TestFiles.directory().appendingPathComponent("t.jsonl").path
        let writer = try JSONLWriter(path: path)
        for (index, flow) in Samples.all.enumerated() {
            writer.record(flow)
            writer.flush() // flushed per line: a reader sees whole lines while the proxy runs
            #expect(try Self.lines(path).count == index + 1)
        }
        writer.close()
        let lines = try Self.lines(path)
        #expect(lines.count == Samples.all.count)
        for line in lines { #expect(Set(line.keys) == Self.keys) }

        let plain = lines[0]
        #expect(plain["id"] as? Int == 1)
        #expect(plain["start"] as? String == "2023-11-14T22:13:20.123Z")
        #expect(plain["client"] as? String == "127.0.0.1:50001")
        #expect(plain["method"] as? String == "GET")
        #expect(plain["url"] as? String == "http://api.example.com/v1/users?token=abc123&page=2")
        #expect(plain["upstream_url"] as? String == "http://127.0.0.1:9000/v1/users?token=abc123&page=2")
        #expect(plain["http_version"] as? String == "HTTP/1.1")
        #expect(plain["status"] as? Int == 200)
        let headers = try #require(plain["request_headers"] as? [[String: String]])
        #expect(headers.map { $0["name"]! } == ["Host", "Authorization", "Cookie", "Accept", "X-Dup", "X-Dup"])
        #expect(headers.last == ["name": "X-Dup", "value": "two"])
        #expect(plain["response_body_size"] as? Int == 17)
        #expect(plain["response_body"] as? String == #"{"users":["ann"]}"#)
        #expect(plain["response_body_encoding"] as? String == "utf8")
        #expect(plain["request_body"] is NSNull)
        let timings = try #require(plain["timings"] as? [String: Any])
        #expect(Set(timings.keys) == ["dns", "connect", "tls", "first_byte", "total"])
        #expect(timings["dns"] as? Double == 1.5)
        #expect(timings["connect"] as? Double == 2.25)
        #expect(timings["tls"] is NSNull)
        #expect(timings["first_byte"] as? Double == 10)
        #expect(timings["total"] as? Double == 12.5)
        #expect(plain["rules"] as? [String] == ["local-api", "no-cookies"])
        #expect(plain["events"] as? [[String: String]] == [["hook": "rule", "action": "mapped", "detail": "→ http://127.0.0.1:9000/v1/users"]])
        #expect(plain["error"] is NSNull)
        #expect(plain["hop"] as? Int == 0)

        let failed = lines[1]
        #expect(failed["status"] is NSNull)
        #expect(failed["error"] as? String == "hookproxy: upstream refused down.example.invalid: Could not resolve host")
        #expect(failed["request_body"] as? String == #"{"a":"b c"}"#)
        #expect(lines[2...4].map { $0["hop"] as? Int } == [0, 1, 2])
    }

    @Test func binaryBodyRoundTripsThroughBase64AndTruncationIsMarked() throws {
        let path = TestFiles.directory().appendingPathComponent("b.jsonl").path
        let writer = try JSONLWriter(path: path)
        writer.record(Samples.binaryBody)
        writer.record(Samples.truncatedBody)
        writer.close()
        let lines = try Self.lines(path)
        #expect(lines[0]["response_body_encoding"] as? String == "base64")
        let encoded = try #require(lines[0]["response_body"] as? String)
        #expect(Data(base64Encoded: encoded).map { Array($0) } == Samples.binary)
        #expect(lines[0]["truncated"] as? [String: Bool] == ["request": false, "response": false])
        #expect(lines[1]["truncated"] as? [String: Bool] == ["request": true, "response": true])
        #expect((lines[1]["response_body"] as? String)?.utf8.count == 1024)
        #expect(lines[1]["response_body_size"] as? Int == 5000)
    }

    @Test func appendsAndIsLocked() throws {
        let path = TestFiles.directory().appendingPathComponent("a.jsonl").path
        var writer = try JSONLWriter(path: path)
        writer.record(Samples.plain)
        #expect(throws: LogFileError.self) { try JSONLWriter(path: path) }
        writer.close()
        writer = try JSONLWriter(path: path)
        writer.record(Samples.failed)
        writer.close()
        #expect(try Self.lines(path).map { $0["id"] as? Int } == [1, 2])
    }

    /// A hostile tester's find: a line torn by a kill during a write stayed, and the next record was glued to it.
    @Test(arguments: [0, 1, 100_000])
    func reopeningDropsATornLastLine(_ tornLength: Int) throws {
        let path = TestFiles.directory().appendingPathComponent("torn.jsonl").path
        var writer = try JSONLWriter(path: path)
        writer.record(Samples.plain)
        writer.close()
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let torn = Data(String(repeating: "{\"id\":9,\"start", count: tornLength / 14 + 1).utf8.prefix(tornLength))
        try (whole + torn).write(to: URL(fileURLWithPath: path))
        writer = try JSONLWriter(path: path)
        writer.record(Samples.failed)
        writer.close()
        #expect(try Self.lines(path).map { $0["id"] as? Int } == [1, 2])
    }

    /// A review helper's find in the first version of the above: a file with no newline at all (a file of someone
    /// else's, given by mistake) was cut to nothing. Only a torn record of hookproxy's is cut.
    @Test(arguments: ["not a log", "{\"a\": 1}", "line one\nline two", String(repeating: "x", count: 200_000)])
    func reopeningKeepsAForeignFile(_ text: String) throws {
        let path = TestFiles.directory().appendingPathComponent("foreign.jsonl").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let writer = try JSONLWriter(path: path)
        writer.record(Samples.plain)
        writer.close()
        let after = try String(contentsOfFile: path, encoding: .utf8)
        #expect(after.hasPrefix(text + "\n"), "the file's own bytes are kept")
        let last = try #require(after.split(separator: "\n").last)
        #expect((try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])?["id"] as? Int == 1)
    }
}

@Suite struct BodyTextTests {
    @Test func chooses() {
        #expect(BodyText(bytes: Array("héllo".utf8), contentType: "text/plain").encoding == .utf8)
        #expect(BodyText(bytes: Array("{}".utf8), contentType: "application/vnd.api+json").encoding == .utf8)
        // Declared textual types keep control characters as text; undeclared ones with them, and binary types, are base64.
        let controls = Array("{\"a\":\"\u{1}\"}".utf8)
        for type in ["application/vnd.api+json", "application/atom+xml", "TEXT/Plain; charset=utf-8", " application/json ;x=y",
                     "image/svg+xml"] {
            #expect(BodyText(bytes: controls, contentType: type).encoding == .utf8, "\(type)")
        }
        for type in ["application/x-unknown", "+json/x", "application/jsonx"] {
            #expect(BodyText(bytes: controls, contentType: type).encoding == .base64, "\(type)")
        }
        for type in ["image/png", "Application/Octet-Stream", "font/woff2", "application/grpc"] {
            #expect(BodyText(bytes: Array("plain".utf8), contentType: type).encoding == .base64, "\(type)")
        }
        #expect(BodyText(bytes: Array("abc".utf8), contentType: "image/png").encoding == .base64)
        #expect(BodyText(bytes: Array("abc".utf8), contentType: "text/plain", contentEncoding: "gzip").encoding == .base64)
        #expect(BodyText(bytes: [0xFF, 0xFE], contentType: "text/plain").encoding == .base64)
        #expect(BodyText(bytes: Array("plain words\n".utf8), contentType: nil).encoding == .utf8)
        #expect(BodyText(bytes: [0x41, 0x00, 0x42], contentType: nil).encoding == .base64)
        // a capture cut inside "é" is still text, without the partial character
        let cut = Array("abcé".utf8).dropLast()
        #expect(BodyText(bytes: Array(cut), contentType: "text/plain", truncated: true).text == "abc")
        #expect(BodyText(bytes: Array(cut), contentType: "text/plain", truncated: false).encoding == .base64)
        let binary = BodyText(bytes: Samples.binary, contentType: nil)
        #expect(binary.bytes == Samples.binary)
    }
}
