#if canImport(Glibc)
import Glibc
#endif

/// The file descriptors a running proxy may need, against what the process may open: at start the soft
/// RLIMIT_NOFILE is raised to the hard limit, then --max-connections (two descriptors each: the client, and its
/// upstream or tunnel) and libcurl's idle-connection cache must fit with a reserve for logs, epoll and the like.
/// What does not fit is lowered, with a warning that says how to keep it. A pure plan plus one setrlimit; any thread.
struct FileDescriptorBudget: Equatable {
    /// Descriptors kept for everything else: listeners, epoll and event fds, log files, inotify, pipes, CA files.
    static let reserve = 64
    /// The smallest connection cache worth keeping.
    static let minimumCache = 16

    var limit: Int
    var maxConnections: Int
    var maxCachedConnections: Int
    /// Set when something was lowered: what, why, and what to do.
    var warning: String?
    /// Set when `limit` is below the reserve: hookproxy cannot run at all (its event loops, the upstream engine and
    /// a listener need those descriptors before the first client), and says so rather than fail on the way.
    var refusal: String?

    /// Fits the configured numbers into `limit` descriptors.
    static func plan(limit: Int, maxConnections: Int, maxCachedConnections: Int) -> FileDescriptorBudget {
        var budget = FileDescriptorBudget(limit: limit, maxConnections: maxConnections,
                                          maxCachedConnections: maxCachedConnections, warning: nil)
        if limit < reserve {
            budget.refusal = "hookproxy: only \(limit) file descriptors are allowed (ulimit -n); hookproxy needs at least \(reserve): raise the limit"
            return budget
        }
        let forConnections = 2 * maxConnections + reserve
        if forConnections + maxCachedConnections <= limit { return budget }
        budget.maxCachedConnections = max(minimumCache, min(maxCachedConnections, limit - forConnections))
        if forConnections + budget.maxCachedConnections > limit {
            budget.maxConnections = max(1, (limit - reserve - budget.maxCachedConnections) / 2)
            budget.warning = "hookproxy: only \(limit) file descriptors are allowed (ulimit -n): --max-connections lowered from \(maxConnections) to \(budget.maxConnections); raise the limit to at least \(forConnections + maxCachedConnections) to keep \(maxConnections)"
        } else {
            budget.warning = "hookproxy: only \(limit) file descriptors are allowed (ulimit -n): the upstream connection cache is lowered from \(maxCachedConnections) to \(budget.maxCachedConnections)"
        }
        return budget
    }

    /// Raises the soft RLIMIT_NOFILE to the hard limit (capped at one million); returns the soft limit in force.
    static func raiseLimit() -> Int {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        let wanted = min(limits.rlim_max, 1 << 20)
        if limits.rlim_cur < wanted {
            var raised = limits
            raised.rlim_cur = wanted
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return Int(wanted) }
        }
        return Int(limits.rlim_cur)
    }
}
