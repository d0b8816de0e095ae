import Foundation
import ProxyModel
import ProxyServer
import ProxyTestSupport
import Testing

/// hookproxy answers and closes while the client is still sending (the upstream failed under an upload, the body did
/// not parse): the client gets the answer, even one that writes its whole upload before reading (Python's
/// `http.client`, `requests`). Closing under the client's unread bytes would reset the connection and destroy the
/// answer; hookproxy shuts its side, drops what still comes, and closes at the client's close or when the client
/// takes nothing for `--idle-timeout` (`LingeringClose`). Clients on threads of their own (`RawClient.run`).
@Suite("HTTP: an answer before the upload ended reaches the client (lingering close)", .timeLimit(.minutes(3)))
struct LingeringCloseHTTPTests {
    static let uploadSize = 8 << 20

    /// Sends `head` and then `body` whole, and only then reads the response: the order of a client that uploads
    /// first. Like Python's `http.client`, it gives up when the sending fails (a reset), without reading.
    /// With `pause`, it waits that long between the head and the body (hookproxy has answered by then).
    static func uploadThenRead(_ client: RawClient, head: String, body: [UInt8],
                               pause: TimeInterval = 0) throws -> RawClient.Response {
        try client.sendNow(Array(head.utf8))
        Thread.sleep(forTimeInterval: pause)
        try client.sendNow(body)
        return try client.readResponseNow()
    }

    /// Three upload-first clients in turn, each posting to a refusing upstream a head ending in `framing` (its framing
    /// header, and what follows the head) and then `body`; their answers, once the proxy let go of every socket.
    static func answersToUploadFirst(framing: String, body: [UInt8], pause: TimeInterval = 0) async throws -> [RawClient.Response] {
        let refusing = try RefusingPort()
        return try await withProxy { proxy in
            var answers: [RawClient.Response] = []
            for _ in 0..<3 {
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
                defer { client.close() }
                let head = "POST http://127.0.0.1:\(refusing.port)/upload HTTP/1.1\r\nHost: 127.0.0.1:\(refusing.port)\r\n" + framing
                answers.append(try await client.run { try Self.uploadThenRead($0, head: head, body: body, pause: pause) })
                #expect(await client.waitForClose(), "hookproxy's side ends with a FIN after the answer")
            }
            #expect(await eventually(timeout: .seconds(20)) { SocketCensus.count(localPort: proxy.port) == 0 })
            return answers
        }
    }

    /// Found by hand with Python's `http.client`: a POST of 5 MB through a proxy whose upstream refuses got
    /// `ConnectionResetError` from its sending instead of the 502.
    @Test("an upload whose upstream refuses: a client that sends its whole body before reading gets the 502")
    func uploadFirstGetsThe502() async throws {
        let answers = try await Self.answersToUploadFirst(framing: "Content-Length: \(Self.uploadSize)\r\n\r\n",
                                                          body: [UInt8](repeating: 7, count: Self.uploadSize))
        #expect(answers.map(\.status) == [502, 502, 502])
        #expect(answers.allSatisfy { $0.header("connection") == "close" })
    }

    @Test("a chunked body that does not parse, with megabytes after it: the client still gets the 400")
    func badBodyGetsThe400() async throws {
        // The rest of the body goes once hookproxy has answered.
        let answers = try await Self.answersToUploadFirst(framing: "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                                                          body: [UInt8](repeating: 0, count: 4 << 20), pause: 0.2)
        #expect(answers.map(\.status) == [400, 400, 400])
        #expect(answers.allSatisfy { String(decoding: $0.body, as: UTF8.self).contains("invalid chunk size") })
    }

    @Test("a client that stops sending and never reads the answer nor closes is let go after --idle-timeout")
    func silentClientIsLetGo() async throws {
        let refusing = try RefusingPort()
        try await withProxy({ $0.limits.clientIdleTimeoutMs = 1000 }) { proxy in
            let head = "POST http://127.0.0.1:\(refusing.port)/upload HTTP/1.1\r\nHost: 127.0.0.1:\(refusing.port)\r\n"
                + "Content-Length: \(Self.uploadSize)\r\n\r\n"
            let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20), sending: head)
            defer { client.close() }
            try await client.send([UInt8](repeating: 7, count: 65536))
            #expect(await eventually(timeout: .seconds(15)) { SocketCensus.count(localPort: proxy.port) == 0 })
            // What hookproxy answered before it let go is still there to read.
            #expect(try await client.readResponse().status == 502)
        }
    }
    @Test("at --max-connections, a connection closing lingering gives its slot to a new client instead of a 503")
    func lingeringYieldsItsSlot() async throws {
        let refusing = try RefusingPort()
        try await withProxy({ $0.limits.maxConnections = 2 }) { proxy in
            let head = "POST http://127.0.0.1:\(refusing.port)/upload HTTP/1.1\r\nHost: 127.0.0.1:\(refusing.port)\r\n"
                + "Content-Length: \(Self.uploadSize)\r\n\r\n"
            // Two clients get their 502 and hookproxy's FIN, and keep their sockets open: both linger.
            var lingering: [RawClient] = []
            defer { for client in lingering { client.close() } }
            for _ in 0..<2 {
                let client = try await RawClient.connect(port: proxy.port, readTimeout: .seconds(20))
                lingering.append(client)
                let response = try await client.run { try Self.uploadThenRead($0, head: head, body: [UInt8](repeating: 7, count: 1 << 20)) }
                #expect(response.status == 502)
                #expect(await client.waitForClose())
            }
            // Two more are served: each takes a lingering connection's slot.
            for _ in 0..<2 {
                let status = try await withRawClient(proxy, sending: rawRequest("GET http://127.0.0.1:\(refusing.port)/ HTTP/1.1",
                                                                                ["Host: 127.0.0.1:\(refusing.port)"])) { client in
                    try await client.readResponse().status
                }
                #expect(status == 502)
            }
        }
    }
}
