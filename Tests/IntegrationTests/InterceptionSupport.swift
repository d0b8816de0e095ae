import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import ProxyServer
import ProxyTestSupport
import Testing
import X509

// Helpers for the issue-5 interception tests: a tiny HTTPS-through-a-proxy client (CONNECT on a raw socket, then
// TLS with swift-nio-ssl trusting only the roots it is given) that reports the certificate it was shown, and a
// runner for the real `hookproxy run` binary. Real sockets on 127.0.0.1 only; every wait bounded.

/// What `TunnelClient.get` saw.
struct TunnelResult {
    /// The proxy's answer to CONNECT (status line and headers).
    var connectHead: String
    /// The leaf the TLS server presented (nil when the handshake failed).
    var peer: Certificate?
    /// ALPN result of the handshake.
    var negotiatedProtocol: String?
    /// Why the handshake (or the exchange) failed; nil when it succeeded.
    var failure: String?
    /// The decrypted HTTP response (head and body), empty when the handshake failed.
    var response: String

    var connectStatus: Int {
        let parts = connectHead.split(separator: " ")
        return parts.count > 1 ? Int(parts[1]) ?? 0 : 0
    }

    var status: Int {
        let parts = response.split(separator: "\r\n", maxSplits: 1).first?.split(separator: " ") ?? []
        return parts.count > 1 ? Int(parts[1]) ?? 0 : 0
    }

    var body: String {
        guard let range = response.range(of: "\r\n\r\n") else { return "" }
        return String(response[range.upperBound...])
    }

    func header(_ name: String) -> String? {
        guard let range = response.range(of: "\r\n\r\n") else { return nil }
        for line in response[..<range.lowerBound].components(separatedBy: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}

/// One HTTPS GET through hookproxy, done by hand: `CONNECT host:port`, then a TLS client handshake that trusts only
/// `trustRoots` (full verification, host name included), then `GET path` with `Connection: close`. `serverName`,
/// when given, is sent as SNI (and verified) instead of the CONNECT host; `request`, when given, is sent instead of
/// the GET (a whole request head, with `Connection: close`).
enum TunnelClient {
    static func get(proxyPort: Int, host: String, port: Int, path: String = "/head-test",
                    trustRoots: [Certificate], alpn: [String] = ["http/1.1"], serverName: String? = nil,
                    request: String? = nil, timeout: TimeAmount = .seconds(15)) async throws -> TunnelResult {
        let collector = TunnelCollector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
            .connect(host: "127.0.0.1", port: proxyPort).get()
        // Every wait below ends at the latest when this fires: closing fails whatever is still pending.
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let connect = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: connect)).get()
        let connectHead = try await collector.connectHead.futureResult.get()
        var result = TunnelResult(connectHead: connectHead, response: "")
        guard result.connectStatus == 200 else { return result }

        let roots = try trustRoots.map { try NIOSSLCertificate(bytes: try $0.serializeAsPEM().derBytes, format: .der) }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates(roots)
        configuration.certificateVerification = .fullVerification
        configuration.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: configuration)
        // SNI must not be an IP literal; without it NIOSSL checks the IP against the connected address
        // (127.0.0.1), which is the IP host these tests use.
        let isIP = host.allSatisfy { $0.isNumber || $0 == "." } || host.contains(":")
        try await channel.eventLoop.submit {
            let handler = try NIOSSLClientHandler(context: context, serverHostname: serverName ?? (isIP ? nil : host))
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        }.get()

        do {
            result.negotiatedProtocol = try await collector.handshake.futureResult.get()
        } catch {
            result.failure = "\(error)"
            return result
        }
        if let peer = try await channel.nioSSL_peerCertificate().get() {
            result.peer = try Certificate(derEncoded: try peer.toDERBytes())
        }
        let request = request ?? "GET \(path) HTTP/1.1\r\nHost: \(authority)\r\nConnection: close\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        do {
            try await collector.responseComplete.futureResult.get()
        } catch {
            result.failure = "\(error)"
        }
        result.response = try await channel.eventLoop.submit { String(decoding: collector.bytes, as: UTF8.self) }.get()
        return result
    }
}

/// Collects what the proxy sends: first the CONNECT answer, then (behind the TLS handler) the decrypted response.
/// Event-loop bound; `@unchecked Sendable` only so it can be handed to the channel initializer.
private final class TunnelCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    struct Closed: Error, CustomStringConvertible {
        var description: String { "the connection closed" }
    }

    private let loop = MultiThreadedEventLoopGroup.singleton.next()
    let connectHead: EventLoopPromise<String>
    let handshake: EventLoopPromise<String?>
    let responseComplete: EventLoopPromise<Void>
    private var done: Set<String> = []
    private var inConnectHead = true
    var bytes: [UInt8] = []

    init() {
        connectHead = loop.makePromise()
        handshake = loop.makePromise()
        responseComplete = loop.makePromise()
    }

    private func once(_ name: String, _ body: () -> Void) {
        guard !done.contains(name) else { return }
        done.insert(name)
        body()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
        if inConnectHead {
            guard let end = Self.headEnd(bytes) else { return }
            inConnectHead = false
            let head = String(decoding: bytes[..<end], as: UTF8.self)
            bytes = Array(bytes[(end + 4)...])
            once("connect") { connectHead.succeed(head) }
            return
        }
        if let end = Self.headEnd(bytes) {
            let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
            let length = head.components(separatedBy: "\r\n")
                .first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
            if let length, bytes.count >= end + 4 + length {
                once("response") { responseComplete.succeed(()) }
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event {
            once("handshake") { handshake.succeed(negotiated) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        once("connect") { connectHead.fail(error) }
        once("handshake") { handshake.fail(error) }
        once("response") { responseComplete.fail(error) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        once("connect") { connectHead.fail(Closed()) }
        once("handshake") { handshake.fail(Closed()) }
        // A response without Content-Length ends at close.
        once("response") { responseComplete.succeed(()) }
        context.fireChannelInactive()
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

extension Certificate {
    /// The DNS names and IP addresses (dotted IPv4) of the subjectAltName extension.
    var sanNames: [String] {
        guard let names = try? extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { name in
            switch name {
            case .dnsName(let dns): return "DNS:\(dns)"
            case .ipAddress(let octets): return "IP:" + octets.bytes.map(String.init).joined(separator: ".")
            default: return nil
            }
        }
    }
}

/// The real `hookproxy run` binary, started on 127.0.0.1:0 with stdout and stderr going to files.
final class RunningHookproxy {
    let process = ChildProcess()
    let stdoutPath: String
    let stderrPath: String
    private(set) var port = 0

    /// Starts `hookproxy run --listen 127.0.0.1:0 ARGS…` and waits (bounded) for its listening line.
    init(executable: String, arguments: [String], directory: TemporaryDirectory) async throws {
        stdoutPath = directory.path + "/hookproxy.stdout"
        stderrPath = directory.path + "/hookproxy.stderr"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["run", "--listen", "127.0.0.1:0"] + arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let started = await eventually(timeout: .seconds(20)) { [self] in
            stdout.contains("hookproxy listening on") || !process.isRunning
        }
        let line = stdout.components(separatedBy: "\n").first { $0.contains("hookproxy listening on") }
        guard started, let line, let url = line.split(separator: " ").last,
              let portText = url.split(separator: ":").last, let port = Int(portText) else {
            await stop()
            throw TestSupportError("hookproxy did not start: stdout \(stdout) stderr \(stderr)")
        }
        self.port = port
    }

    var proxyURL: String { "http://127.0.0.1:\(port)" }
    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits (bounded, without blocking a thread) for the exit; SIGKILL if it does not come.
    /// Idempotent.
    @discardableResult
    func stop() async -> Int32? {
        if process.isRunning {
            process.terminate()
            let exited = await eventually(timeout: .seconds(10), interval: .milliseconds(10)) { !process.isRunning }
            if !exited {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Last resort when a test forgot `stop()`: SIGKILL, never a wait.
    deinit {
        if process.processIdentifier != 0, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Runs `body` with the binary running and always stops it.
func withRunningHookproxy<T>(_ arguments: [String], in directory: TemporaryDirectory,
                             _ body: (RunningHookproxy) async throws -> T) async throws -> T {
    guard let executable = Hooks.executable else {
        throw TestSupportError("the hookproxy binary is not built (.build/debug/hookproxy); run swift build first")
    }
    let running = try await RunningHookproxy(executable: executable, arguments: arguments, directory: directory)
    do {
        let result = try await body(running)
        await running.stop()
        return result
    } catch {
        await running.stop()
        throw error
    }
}

/// The number of (possibly overlapping) occurrences of `needle` in `text`.
func occurrences(of needle: String, in text: String) -> Int {
    text.components(separatedBy: needle).count - 1
}
