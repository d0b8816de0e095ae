import Glibc

/// `--idle-timeout` upstream, kept to the second: a transfer whose upstream sends and takes nothing for that long
/// fails with 504. curl's own low-speed check (CURLOPT_LOW_SPEED_TIME, kept as a backstop) reads a speed averaged
/// over up to five seconds, and from the transfer's start before that, so a request that had uploaded a body timed
/// out seconds late (2 KB posted to a silent server with `--idle-timeout 2`: 8 s). While a low-speed limit is set,
/// curl calls the progress callback at least once a second, and `CurlTransfer` checks this clock there.
///
/// The transfer's own callbacks (header lines, body bytes, request body reads) count as movement; so does a
/// resume. A pause hookproxy asked for (its client reads or sends slowly) is not the upstream's silence: the clock
/// stands still while one holds, and the client's side has its own idle timeout. Before curl has a connection for
/// the transfer, the connect timeout applies, not this. Loop-bound, with its transfer.
struct UpstreamIdleClock {
    /// Bumped by every callback that moved bytes.
    private var moved: UInt64 = 0
    private var seen: UInt64 = .max
    /// When `seen` was last taken (CLOCK_MONOTONIC, ns).
    private var since: UInt64 = 0
    /// curl gave the transfer its connection (CURLOPT_PREREQFUNCTION).
    var connected = false
    /// hookproxy paused the transfer (its client is behind) and has not resumed it.
    var heldByHookproxy = false

    @inline(__always)
    mutating func moved(pausing: Bool = false) {
        moved &+= 1
        heldByHookproxy = pausing
    }

    mutating func resumed() {
        moved &+= 1
        heldByHookproxy = false
    }

    /// Whether the transfer stood still, connected and unpaused, for `limitMs` up to now.
    mutating func expired(limitMs: Int) -> Bool {
        let now = UpstreamIdleClock.nowNanoseconds()
        if moved != seen || heldByHookproxy || !connected {
            seen = moved
            since = now
            return false
        }
        return now &- since >= UInt64(max(0, limitMs)) &* 1_000_000
    }

    static func nowNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
