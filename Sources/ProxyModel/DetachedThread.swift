#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts a detached POSIX thread that runs one closure and ends (Foundation's `Thread` without Foundation).
/// Used for the threads hookproxy keeps for itself: the log writers, the rules watcher, the name lookups.
public enum DetachedThread {
    /// Runs `body` on a new thread with the system's default stack. Returns false, having run nothing, when the
    /// system refuses another thread (`pthread_create` fails: EAGAIN at the process's or the user's thread limit).
    @discardableResult
    public static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        guard created == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
