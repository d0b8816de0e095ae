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

    /// An upstream's header, `Location` or close reason carries terminal escapes: the console shows them as text.
    @Test func trafficCannotDriveTheTerminal() {
        var flow = Samples.plain
        flow.response?.headers.add("X-Evil", "a\u{1B}]0;PWNED\u{07}b\u{1B}[2J\u{9B}c\u{7F}")
        flow.events.append(HookEvent(hook: .redirect, action: "redirect", detail: "to /x\u{1B}[31mred"))
        let line = ConsoleLog.line(for: flow, color: true, utc: true)
        #expect(line.hasSuffix("mapped: → http://127.0.0.1:9000/v1/users redirect: to /x\\x1B[31mred"))
        #expect(line.filter { $0 == "\u{1B}" }.count == 2) // the status colour's own two
        #expect(ConsoleLog.headerLines(for: flow).last == "  < X-Evil: a\\x1B]0;PWNED\\x07b\\x1B[2J\\u009Bc\\x7F")

        var session = Samples.plain
        session.webSocket = WebSocketLog(close: .init(code: 4001, reason: "bye\u{1B}[H\u{1B}[J", by: .server))
        let sessionLine = ConsoleLog.line(for: session, utc: true)
        #expect(sessionLine.hasSuffix("by server: bye\\x1B[H\\x1B[J"))
        #expect(!sessionLine.contains("\u{1B}"))
        // Text without control characters is untouched, tabs and non-ASCII included in the check.
        #expect(TerminalSafe.text("héllo ½ 日本 ✓") == "héllo ½ 日本 ✓")
        #expect(TerminalSafe.text("a\tb") == "a\\x09b")
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
