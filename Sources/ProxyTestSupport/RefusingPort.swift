#if canImport(Glibc)
import Glibc
#endif

/// A port on 127.0.0.1 that refuses every connection for as long as this value lives: a socket is bound to it but
/// never listens. (A port bound and then closed is free again, and a test running beside this one can take it.)
public final class RefusingPort: Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RefusingPortError(errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            let code = errno
            close(fd)
            throw RefusingPortError(errno: code)
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

/// The socket for a `RefusingPort` could not be made.
public struct RefusingPortError: Error, CustomStringConvertible {
    public let errno: Int32
    public var description: String { "cannot bind a refusing port on 127.0.0.1: errno \(errno)" }
}
