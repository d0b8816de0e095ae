import Foundation
import ProxyTestSupport
import Testing

/// Issue 16, "trailers both ways": the request side. A chunked upload's trailer fields reach an HTTP/1.1 origin
/// after the last chunk (libcurl's trailer callback); `Trailer`, which names them, is forwarded; framing and
/// routing fields sent as trailers are not (a Content-Length trailer is refused by the parser: 400).
@Suite("request trailers (issue 16)", .timeLimit(.minutes(2)))
struct RequestTrailerTests {
    @Test("chunked uploads after one with trailers, on the same event loop (libcurl's recycled handle), arrive intact")
    func chunkedUploadsAfterTrailers() async throws {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        try await MisbehavingOrigin.with([.pause(milliseconds: 100), .text(answer), .close]) { origin in
            try await withProxy { proxy in
                // One client connection: every exchange runs on its event loop, whose engine reuses easy handles.
                try await withRawClient(proxy) { client in
                    for round in 0..<4 {
                        let trailers = round == 0 ? ["Trailer: X-Checksum"] : []
                        let head = rawRequest("POST \(origin.baseURL)/upload/\(round) HTTP/1.1", [
                            "Host: 127.0.0.1:\(origin.port)", "Transfer-Encoding: chunked"] + trailers)
                        let body = "7\r\nround-\(round)\r\n0\r\n" + (round == 0 ? "X-Checksum: c0\r\n" : "") + "\r\n"
                        try await client.send(Array(head.utf8) + Array(body.utf8))
                        let response = try await client.readResponse(method: "POST")
                        #expect(response.status == 200, "round \(round): \(response.rawHead)\(response.bodyText)")
                    }
                }
                let received = String(decoding: origin.received, as: UTF8.self)
                for round in 0..<4 {
                    #expect(received.contains("\r\n\r\n7\r\nround-\(round)\r\n0\r\n"), "round \(round): \(received)")
                }
                #expect(received.contains("0\r\nX-Checksum: c0\r\n\r\n"))
            }
        }
    }

    @Test("a chunked upload's trailers reach the origin after the last chunk; Host, Authorization, If-* and trailers the head's Connection names do not")
    func chunkedUploadTrailers() async throws {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        try await MisbehavingOrigin.with([.pause(milliseconds: 200), .text(answer)]) { origin in
            try await withProxy { proxy in
                try await withRawClient(proxy) { client in
                    let head = rawRequest("POST \(origin.baseURL)/upload HTTP/1.1", [
                        "Host: 127.0.0.1:\(origin.port)", "Transfer-Encoding: chunked", "Trailer: X-Checksum",
                        "Connection: X-Hop-Only",
                    ])
                    let body = "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: sha256=abc\r\nX-Hop-Only: 1\r\nHost: elsewhere.example\r\nAuthorization: Bearer smuggled\r\nIf-Match: \"x\"\r\n\r\n"
                    try await client.send(Array(head.utf8) + Array(body.utf8))
                    let response = try await client.readResponse(method: "POST")
                    #expect(response.status == 200, "\(response.rawHead)\(response.bodyText)")
                }
                let arrived = await eventually(timeout: .seconds(10)) {
                    String(decoding: origin.received, as: UTF8.self).contains("\r\n0\r\n")
                }
                let received = String(decoding: origin.received, as: UTF8.self)
                #expect(arrived, "\(received)")
                let parts = received.components(separatedBy: "\r\n\r\n")
                let head = parts.first ?? ""
                #expect(head.contains("\r\nTrailer: X-Checksum"), "\(head)")
                #expect(head.lowercased().contains("transfer-encoding: chunked"), "\(head)")
                let tail = received.dropFirst(head.count)
                #expect(tail.contains("hello") && tail.contains(" world"), "\(received)")
                #expect(tail.hasSuffix("0\r\nX-Checksum: sha256=abc\r\n\r\n"), "the upload's end: \(tail.suffix(80))")
                #expect(!tail.contains("elsewhere.example"), "a routing field went on as a trailer")
                #expect(!tail.contains("X-Hop-Only"), "a trailer the head's Connection names went on: \(tail.suffix(120))")
                #expect(!tail.contains("smuggled") && !tail.contains("If-Match"),
                        "fields RFC 9110 forbids in trailers (authentication, conditionals) went on: \(tail.suffix(120))")
            }
        }
    }

    @Test("a Connection naming 16,000 fields before 7,800 request trailers: answered in time (the trailer filter is linear)")
    func connectionNamingManyTrailers() async throws {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        try await MisbehavingOrigin.with([.pause(milliseconds: 300), .text(answer)]) { origin in
            try await withProxy { proxy in
                // Each trailer against each name held the event loop for a minute (a review's find); the read
                // timeout is far above the linear cost and far below the quadratic one.
                try await withRawClient(proxy, readTimeout: .seconds(20)) { client in
                    let named = Array(repeating: "a", count: 16_000).joined(separator: ",")
                    let head = rawRequest("POST \(origin.baseURL)/upload HTTP/1.1", [
                        "Host: 127.0.0.1:\(origin.port)", "Transfer-Encoding: chunked", "Trailer: b", "Connection: A,\(named)",
                    ])
                    let trailers = String(repeating: "b: 1\r\n", count: 7_800) + "a: gone\r\n"
                    try await client.send(Array(head.utf8) + Array("2\r\nhi\r\n0\r\n\(trailers)\r\n".utf8))
                    let response = try await client.readResponse(method: "POST")
                    #expect(response.status == 200, "\(response.rawHead)")
                }
                let arrived = await eventually(timeout: .seconds(10)) {
                    let received = String(decoding: origin.received, as: UTF8.self)
                    return received.contains("\r\n0\r\n") && received.hasSuffix("\r\n\r\n")
                }
                let tail = String(decoding: origin.received, as: UTF8.self).components(separatedBy: "\r\n0\r\n").last ?? ""
                #expect(arrived && tail.contains("b: 1\r\n") && !tail.contains("a: gone"), "\(tail.suffix(80))")
            }
        }
    }
}
