import Glibc
import NIOCore

/// How much of what was sent on a TCP connection its peer has taken: the bytes it acknowledged (`TCP_INFO`'s
/// `tcpi_bytes_acked`, Linux 4.1 on). The count grows only when the peer's kernel accepts new data, so it tells a
/// peer that still reads (however slowly) from one that does not: a window probe to a peer that reads nothing, or a
/// retransmission to one whose kernel drops what comes, leaves it where it was. (The time of the last data sent does
/// not: every retransmission resets it, and a peer that took nothing held a lingering connection for four times its
/// bound, and past the bound's check altogether once the kernel's retransmissions were spaced out wider.)
public enum AcknowledgedBytes {
    /// The kernel's `struct tcp_info` (232 bytes on Linux 6), read whole into zeroed words: glibc's declaration stops
    /// before `tcpi_bytes_acked`, at byte offset 120 (word 15).
    typealias KernelTCPInfo = SIMD32<UInt64>
    private static let bytesAckedWord = 15

    /// The count on `socket`; 0 when the kernel cannot say.
    public static func of(socket: Int32) -> UInt64 {
        var info = KernelTCPInfo()
        var length = socklen_t(MemoryLayout<KernelTCPInfo>.size)
        guard getsockopt(socket, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0,
              Int(length) >= (bytesAckedWord + 1) * 8 else { return 0 }
        return info[bytesAckedWord]
    }

    /// The count on a NIO channel's socket (0 when it cannot say): on the channel's loop the future is complete when
    /// returned.
    public static func of(channel: any Channel) -> EventLoopFuture<UInt64> {
        guard let socket = channel as? any SocketOptionProvider else { return channel.eventLoop.makeSucceededFuture(0) }
        let info: EventLoopFuture<KernelTCPInfo> = socket.unsafeGetSocketOption(level: .tcp, name: .tcp_info)
        return info.map { $0[bytesAckedWord] }
    }
}
