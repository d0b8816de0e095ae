import Crypto
import Foundation
import NIOCore
import NIOHTTP1

// The TestOrigin's routes (documented on `TestOrigin`). Event-loop thread only.
extension OriginHandler {
    func route(context: ChannelHandlerContext, request: Incoming) {
        let method = request.head.method
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let first = parts.first ?? ""
        let argument = parts.count > 1 ? parts[1] : nil
        let echoHeaders = [("X-Method", method.rawValue), ("X-Target", request.head.uri)]

        switch first {
        case "echo":
            respond(context: context, method: method, status: 200,
                    headers: [("Content-Type", "application/octet-stream")] + echoHeaders, body: request.body)
        case "headers":
            respond(context: context, method: method, status: 200, headers: [("Content-Type", "text/plain")],
                    body: request.rawHead)
        case "bytes", "chunked", "close-mid-body":
            guard let count = argument.flatMap(Int64.init), count >= 0 else {
                return respond(context: context, method: method, status: 400, text: "bad length\n")
            }
            let chunked = first == "chunked"
            writeHead(context: context, status: 200, headers: [("Content-Type", "application/octet-stream")],
                      contentLength: chunked ? nil : count, chunked: chunked)
            if method == .HEAD { return finish(context: context) }
            let abort = first == "close-mid-body"
            startStream(context: context, Stream(position: 0, end: abort ? count / 2 : count, chunked: chunked,
                                                 abort: abort))
        case "drip":
            let chunks = request.query["chunks"].flatMap(Int.init) ?? 5
            let interval = request.query["interval_ms"].flatMap(Int64.init) ?? 100
            let size = request.query["size"].flatMap(Int.init) ?? 16
            writeHead(context: context, status: 200, headers: [("Content-Type", "application/octet-stream")],
                      contentLength: nil, chunked: true)
            context.flush()
            drip(context: context, index: 0, chunks: chunks, interval: interval, size: size)
        case "sha256":
            let digest = request.hasher.finalize().map { String(format: "%02x", $0) }.joined()
            respond(context: context, method: method, status: 200, text: "\(digest) \(request.bodyCount)")
        case "status":
            let code = argument.flatMap(Int.init) ?? 200
            guard (100...999).contains(code) else {
                return respond(context: context, method: method, status: 400, text: "bad status\n")
            }
            if (100..<200).contains(code) && code != 101 {
                writeHead(context: context, status: code, contentLength: nil)
                respond(context: context, method: method, status: 200, text: "final after \(code)\n")
            } else {
                respond(context: context, method: method, status: code, text: "status \(code)\n")
            }
        case "set-cookies":
            respond(context: context, method: method, status: 200,
                    headers: [("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/; HttpOnly"),
                              ("Set-Cookie", "c=3; Path=/; Secure")],
                    text: "three cookies\n")
        case "head-test":
            respond(context: context, method: method, status: 200, headers: [("X-Head-Test", "yes")],
                    text: "head-test body\n")
        case "hang":
            break  // never answered; the connection stays open until the client or shutdown closes it
        case "held":
            // answered once the test calls `release(key)`: a deterministic "slow" response
            let key = request.query["key"] ?? ""
            let first = request.query["first"]
            if let first {
                writeHead(context: context, status: 200, headers: [("Content-Type", "text/plain")], contentLength: nil,
                          chunked: true)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: first)))), promise: nil)
            }
            let answer = NIOLoopBound({ [self] in
                guard active else { return }
                if first != nil {
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "released\n")))), promise: nil)
                    finish(context: context)
                } else {
                    respond(context: context, method: method, status: 200, text: "slow head\n")
                }
            }, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            configuration.recorder.hold(key) { loop.execute { answer.value() } }
        case "slow-head":
            let delay = request.query["ms"].flatMap(Int64.init) ?? 1000
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) { [self] in
                guard active else { return }
                respond(context: context, method: method, status: 200, text: "slow head\n")
            }
        case "redirect":
            let status = request.query["status"].flatMap(Int.init) ?? 302
            let location = request.query["to"] ?? "/"
            respond(context: context, method: method, status: status, headers: [("Location", location)],
                    text: "redirecting to \(location)\n")
        case "redirect-chain":
            let hops = argument.flatMap(Int.init) ?? 0
            if hops <= 0 {
                respond(context: context, method: method, status: 200, headers: echoHeaders, text: "chain done\n")
            } else {
                respond(context: context, method: method, status: 302,
                        headers: [("Location", "/redirect-chain/\(hops - 1)")], text: "\(hops) hops left\n")
            }
        case "redirect-loop":
            respond(context: context, method: method, status: 302, headers: [("Location", "/redirect-loop")],
                    text: "loop\n")
        case "auth" where argument == "basic":
            basicAuth(context: context, request: request, echoHeaders: echoHeaders)
        case "auth" where argument == "digest":
            digestAuth(context: context, request: request, echoHeaders: echoHeaders)
        default:
            respond(context: context, method: method, status: 404, text: "no route \(request.path)\n")
        }
    }

    private func drip(context: ChannelHandlerContext, index: Int, chunks: Int, interval: Int64, size: Int) {
        guard active else { return }
        guard index < chunks else { return finish(context: context) }
        let bytes = ByteBuffer(bytes: pattern(count: size, from: index * size))
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(interval)) { [self] in
            drip(context: context, index: index + 1, chunks: chunks, interval: interval, size: size)
        }
    }

    private func basicAuth(context: ChannelHandlerContext, request: Incoming, echoHeaders: [(String, String)]) {
        let expected = "Basic " + Data("\(request.query["user"] ?? ""):\(request.query["pass"] ?? "")".utf8)
            .base64EncodedString()
        if request.head.headers.first(name: "Authorization") == expected, let chunks = request.query["chunks"].flatMap(Int.init) {
            // `chunks=N`: the authorized answer drips N chunks of 1000 bytes, 50 ms apart (a long response).
            writeHead(context: context, status: 200, headers: [("Content-Type", "application/octet-stream")],
                      contentLength: nil, chunked: true)
            context.flush()
            drip(context: context, index: 0, chunks: chunks, interval: 50, size: 1000)
        } else if request.head.headers.first(name: "Authorization") == expected {
            respond(context: context, method: request.head.method, status: 200,
                    headers: [("Content-Type", "application/octet-stream")] + echoHeaders, body: request.body)
        } else {
            // `close=1`: the 401 closes its connection, so the answer comes on a new one.
            if request.query["close"] == "1" { closeAfterResponse = true }
            respond(context: context, method: request.head.method, status: 401,
                    headers: [("WWW-Authenticate", "Basic realm=\"test\"")], text: "unauthorized\n")
        }
    }

    private func digestAuth(context: ChannelHandlerContext, request: Incoming, echoHeaders: [(String, String)]) {
        let realm = "test"
        let user = request.query["user"] ?? ""
        let password = request.query["pass"] ?? ""
        // `stale=1`: a server that never accepts, and calls every answer's nonce stale (a fresh one each time).
        let alwaysStale = request.query["stale"] == "1"
        if !alwaysStale, let authorization = request.head.headers.first(name: "Authorization"),
            let answer = DigestAnswer(authorization),
            configuration.recorder.state.withLock({ $0.digestNonces.contains(answer.nonce) }),
            answer.verify(user: user, realm: realm, password: password, method: request.head.method.rawValue,
                          target: request.head.uri)
        {
            configuration.recorder.state.withLock { $0.digestSuccesses += 1 }
            respond(context: context, method: request.head.method, status: 200,
                    headers: [("Content-Type", "application/octet-stream"), ("X-Digest-Verified", "true")]
                        + echoHeaders,
                    body: request.body)
            return
        }
        let nonce = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        configuration.recorder.state.withLock { _ = $0.digestNonces.insert(nonce) }
        let challenge = "Digest realm=\"\(realm)\", qop=\"auth\", algorithm=MD5, nonce=\"\(nonce)\", opaque=\"hookproxy\""
            + (alwaysStale ? ", stale=true" : "")
        respond(context: context, method: request.head.method, status: 401,
                headers: [("WWW-Authenticate", challenge)], text: "unauthorized\n")
    }
}
