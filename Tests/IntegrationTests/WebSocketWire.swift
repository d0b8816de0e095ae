import Foundation
import ProxyTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Hand-made WebSocket bytes for tests that speak the protocol badly on purpose (a real client cannot send a
/// fragmented ping or a 2^40-byte length), and the raw handshake heads they start with. Pure values; any thread.
enum WebSocketWire {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    /// A handshake head for `target` (absolute-form through the proxy); `extra` lines go before the empty line.
    static func handshake(_ target: String, host: String, version: String = "HTTP/1.1",
                          connection: String = "Upgrade", extra: [String] = []) -> String {
        rawRequest("GET \(target) \(version)", ["Host: \(host)", "Upgrade: websocket", "Connection: \(connection)",
                                                 "Sec-WebSocket-Key: \(key)", "Sec-WebSocket-Version: 13"] + extra)
    }

    /// One frame: FIN, opcode and RSV bits (`rsv`: RSV1 is 4, RSV3 1) as given, masked with a fixed key when `masked`
    /// (a client's frames must be).
    static func frame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | rsv << 4 | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            bytes.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            bytes.append(maskBit | 126)
            bytes += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (UInt64($0) * 8)) & 0xFF) }
        }
        guard masked else { return bytes + payload }
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return bytes + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    static func text(_ text: String, masked: Bool = true) -> [UInt8] { frame(opcode: 1, Array(text.utf8), masked: masked) }

    /// A frame head that announces `length` payload bytes (none follow): a decoder must refuse it, not wait for them.
    static func hugeFrameHead(length: UInt64 = 1 << 40, masked: Bool = true) -> [UInt8] {
        [0x82, (masked ? 0x80 : 0) | 127] + (0..<8).reversed().map { UInt8((length >> (UInt64($0) * 8)) & 0xFF) }
            + (masked ? [1, 2, 3, 4] : [])
    }

    /// A ping without FIN: control frames may not be fragmented (RFC 6455 §5.5).
    static func fragmentedPing(masked: Bool = true) -> [UInt8] { frame(opcode: 9, [], fin: false, masked: masked) }

    /// One frame as `frames` reads it: its first byte's opcode and RSV bits, and its payload unmasked.
    struct Frame: Equatable {
        var opcode: UInt8
        var payload: [UInt8]
        var masked: Bool
        /// A close frame's code, and its reason.
        var closeCode: Int? { opcode == 8 && payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : nil }
        var closeReason: String { String(decoding: payload.dropFirst(2), as: UTF8.self) }
    }

    /// The complete frames at the start of `bytes`, in order, masked ones unmasked.
    static func frames(_ bytes: [UInt8]) -> [Frame] {
        var out: [Frame] = []
        var at = 0
        while at + 2 <= bytes.count {
            let masked = bytes[at + 1] & 0x80 != 0
            var length = Int(bytes[at + 1] & 0x7F)
            var start = at + 2
            if length == 126 {
                guard start + 2 <= bytes.count else { break }
                length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
                start += 2
            } else if length == 127 {
                guard start + 8 <= bytes.count else { break }
                length = bytes[start..<start + 8].reduce(0) { $0 << 8 | Int($1) }
                start += 8
            }
            let mask = masked ? Array(bytes[min(start, bytes.count)..<min(start + 4, bytes.count)]) : []
            if masked { start += 4 }
            guard start + length <= bytes.count else { break }
            let payload = masked
                ? bytes[start..<start + length].enumerated().map { $0.element ^ mask[$0.offset % 4] }
                : Array(bytes[start..<start + length])
            out.append(Frame(opcode: bytes[at] & 0x0F, payload: payload, masked: masked))
            at = start + length
        }
        return out
    }

    /// The payloads of the complete frames at the start of `bytes`, in order.
    static func payloads(_ bytes: [UInt8]) -> [[UInt8]] { frames(bytes).map(\.payload) }

    /// The frames after the first empty line of `bytes` (an HTTP head, then a session's frames).
    static func framesAfterHead(_ bytes: [UInt8]) -> [Frame] {
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4].elementsEqual([13, 10, 13, 10]) })
        else { return [] }
        return frames(Array(bytes[(end + 4)...]))
    }

    /// A close frame with `code` and `reason`.
    static func close(_ code: UInt16, _ reason: String, masked: Bool = true) -> [UInt8] {
        frame(opcode: 8, [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8), masked: masked)
    }
}

/// Counts this process's TCP sockets by port: the sockets that one proxy holds (accepted on its port, or connected to
/// one origin's port), whatever other tests open meanwhile. Each open descriptor of `/proc/self/fd` that is a socket
/// is asked its own addresses (`getsockname`, `getpeername`): `/proc/net/tcp` is read a page at a time while other
/// tests open and close sockets, so a socket could be missing from it (seen: a lingering connection counted as gone).
enum SocketCensus {
    /// Open descriptors of this process that are TCP sockets with local port `local` (not listening) or remote port
    /// `remote`.
    static func count(localPort local: Int? = nil, remotePort remote: Int? = nil) -> Int {
        var count = 0
        for fd in ownSocketDescriptors() {
            guard let (localPort, remotePort, listening) = ports(of: fd) else { continue }
            if let local, localPort == local, !listening { count += 1 } else if let remote, remotePort == remote { count += 1 }
        }
        return count
    }

    /// The descriptor's local and remote ports (remote -1 when it has no peer: listening, or reset) and whether it
    /// listens; nil for a socket that is not TCP over IPv4 or IPv6 (or a descriptor closed meanwhile).
    private static func ports(of fd: Int32) -> (local: Int, remote: Int, listening: Bool)? {
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue) else { return nil }
        guard let local = port(fd, getsockname) else { return nil }
        var accepting: Int32 = 0
        length = socklen_t(MemoryLayout<Int32>.size)
        let listening = getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 && accepting != 0
        return (local, port(fd, getpeername) ?? -1, listening)
    }

    private static func port(_ fd: Int32, _ name: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(fd, $0, &length) }
        }
        guard got == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        default:
            return nil
        }
    }

    private static func ownSocketDescriptors() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
                  target.hasPrefix("socket:[") else { return nil }
            return Int32(name)
        }
    }
}

extension RawClient {
    /// A raw client through `proxy` whose WebSocket handshake with the server on 127.0.0.1:`port` got its 101.
    static func webSocket(through proxy: ProxyHarness, to port: Int, readTimeout: Duration = .seconds(10)) async throws -> RawClient {
        let client = try await RawClient.connect(port: proxy.port, readTimeout: readTimeout)
        try await client.send(WebSocketWire.handshake("http://127.0.0.1:\(port)/", host: "127.0.0.1:\(port)"))
        let status = try await client.readResponse().status
        guard status == 101 else {
            client.close()
            throw TestSupportError("the WebSocket handshake got \(status), not 101")
        }
        return client
    }
}
