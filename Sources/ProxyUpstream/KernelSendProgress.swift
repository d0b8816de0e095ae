import Glibc
import NIOCore

/// Whether the kernel still sends a connection's queued bytes to its peer, from `TCP_INFO`: a peer that reads slowly
/// takes them for a long while after the last `write` returned, and a connection bounded by "no progress for
/// `--idle-timeout`" must not be cut off under them.
enum KernelSendProgress {
    /// Whether the kernel sent data on `socket` within `window`. A window probe to a peer that reads nothing carries
    /// none, so such a peer counts as taking nothing. False when the socket cannot say.
    static func sentData(on socket: Int32, within window: TimeAmount) -> Bool {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(socket, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return false }
        return TimeAmount.milliseconds(Int64(info.tcpi_last_data_sent)) < window
    }
}
