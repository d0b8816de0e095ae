import Foundation
import ProxyModel
import Testing
@testable import ProxyLog

@Suite struct ConsoleLogTests {
    @Test func lineFormat() {
        let plain = Redactor(redactQuery: ["token"]).redact(Samples.plain)
        #expect(ConsoleLog.line(for: plain, utc: true)
                == "22:13:20.123 200 GET http://api.example.com/v1/users?token=<redacted>&page=2 17 B 13 ms [local-api, no-cookies] mapped: → http://127.0.0.1:9000/v1/users")
        #expect(ConsoleLog.line(for: Samples.redirectChain[2], utc: true)
                == "22:13:22.323 200 GET https://b.example.com/final 4 B 9 ms hop 2 [follow-redirects] redirect followed 2 hops")
        #expect(ConsoleLog.line(for: Samples.trustRejected, utc: true)
                == "22:13:26.123 ERR GET https://pinned.example.com/ 0 B 20 ms [pin-api] trust rejected: no pin matched error: hookproxy: trust rejected pinned.example.com: no pin matched")
        #expect(ConsoleLog.line(for: Samples.truncatedBody, utc: true)
                == "22:13:25.123 201 PUT http://big.example.com/log.txt 4.9 KiB 1.50 s")
    }

    @Test func colourPerStatusClassOnlyWhenAsked() {
        #expect(ConsoleLog.line(for: Samples.plain, color: true, utc: true).contains("\u{1B}[32m200\u{1B}[0m"))
        #expect(ConsoleLog.line(for: Samples.redirectChain[0], color: true, utc: true).contains("\u{1B}[36m302\u{1B}[0m"))
        #expect(ConsoleLog.line(for: Samples.failed, color: true, utc: true).contains("\u{1B}[31mERR\u{1B}[0m"))
        #expect(!ConsoleLog.line(for: Samples.plain, utc: true).contains("\u{1B}"))
    }

    @Test func humanUnits() {
        #expect(ConsoleLog.humanSize(0) == "0 B")
        #expect(ConsoleLog.humanSize(1023) == "1023 B")
        #expect(ConsoleLog.humanSize(1229) == "1.2 KiB")
        #expect(ConsoleLog.humanSize(5 * 1024 * 1024 + 512 * 1024) == "5.5 MiB")
        #expect(ConsoleLog.humanSize(3 * 1024 * 1024 * 1024) == "3.0 GiB")
        #expect(ConsoleLog.humanDuration(0.4) == "0 ms")
        #expect(ConsoleLog.humanDuration(999) == "999 ms")
        #expect(ConsoleLog.humanDuration(61_000) == "61.00 s")
    }

    @Test func linesFromManyThreadsNeverInterleave() throws {
        let path = TestFiles.directory().appendingPathComponent("console.txt").path
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let console = ConsoleLog(verbose: true, color: false, fileDescriptor: fd)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<50 { console.record(Samples.plain) }
        }
        console.close()
        close(fd)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 400 * 10) // the line and 9 header lines, 400 times
        for (index, line) in lines.enumerated() where index % 10 == 0 { #expect(line.contains(" 200 GET ")) }
    }
}
