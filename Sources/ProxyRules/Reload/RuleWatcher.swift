import FoundationEssentials
import ProxyModel
#if canImport(Glibc)
import Glibc
#endif

/// Watches a RuleStore's files on its own thread and reloads the store when they change.
///
/// The thread loops: wait for an inotify event (Linux) or 250 ms, then compare a fingerprint of every watched
/// path (existence, size, mtime, inode; directory listings). A changed fingerprint is given 100 ms to settle
/// (editors write in steps), then the store reloads and `onReload` is called. Changes are never missed: inotify
/// only wakes the loop early; the fingerprint decides.
final class RuleWatcher: @unchecked Sendable {
    private let store: RuleStore
    private let onReload: @Sendable (Result<RuleSet, RuleLoadFailure>) -> Void
    private let stopped = Locked(false)
    static let pollInterval = 250  // ms
    static let settleInterval = 100  // ms

    init(store: RuleStore, onReload: @escaping @Sendable (Result<RuleSet, RuleLoadFailure>) -> Void) {
        self.store = store
        self.onReload = onReload
    }

    func start() {
        let started = DetachedThread.start { [self] in self.run() }
        precondition(started, "hookproxy: cannot start the rules watcher thread")
    }

    func stop() { stopped.value = true }

    private var isStopped: Bool { stopped.value }

    private func run() {
        let notifier = INotify()
        var last = store.lastSeen.value
        notifier?.watch(directoriesFor: store.watchedPaths)
        while !isStopped {
            if let notifier { notifier.wait(milliseconds: Self.pollInterval) } else { Self.sleep(ms: Self.pollInterval) }
            if isStopped { break }
            let now = Fingerprint.of(store.watchedPaths)
            guard now != last else { continue }
            Self.sleep(ms: Self.settleInterval)
            notifier?.drain()
            let settled = Fingerprint.of(store.watchedPaths)
            guard settled == now else { continue }  // still changing: look again next round
            if isStopped { break }
            let result = store.reload()
            last = store.lastSeen.value  // as this load saw the files (dependencies may have changed)
            notifier?.watch(directoriesFor: store.watchedPaths)
            if !isStopped { onReload(result) }
        }
        notifier?.close()
    }

    static func sleep(ms: Int) { usleep(useconds_t(ms * 1000)) }
}

/// What the watcher compares: per path, whether it exists, its size, mtime and inode; for a directory, whether it
/// exists and its inode, and the same as for a file for each rule file in it (`RuleLoader.isRuleFileName`). Other
/// files in a rules directory are not the rules': a console log or a HAR written there grew with every line, the
/// proxy reloaded for it and logged that it had, which grew the file again, ten reloads a second for good.
struct Fingerprint: Equatable {
    var entries: [String: [Int]] = [:]

    static func of(_ paths: [String]) -> Fingerprint {
        var print = Fingerprint()
        for path in paths {
            var isDirectory = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory {
                // Not its mtime: that moves whenever any file in it is made or removed.
                print.entries[path] = directoryKey(path)
                for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                where RuleLoader.isRuleFileName(name) {
                    let child = PathText.appending(name, to: path)
                    print.entries[child] = statKey(child)
                }
            } else {
                print.entries[path] = statKey(path)
            }
        }
        return print
    }

    func merging(_ other: Fingerprint) -> Fingerprint {
        Fingerprint(entries: entries.merging(other.entries) { first, _ in first })
    }

    /// A directory's inode: the same directory, or one put in its place.
    private static func directoryKey(_ path: String) -> [Int] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [-1] }
        return [Int(info.st_ino)]
    }

    private static func statKey(_ path: String) -> [Int] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [-1] }
        #if os(Linux)
        return [Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ino),
                Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)]
        #else
        return [Int(info.st_size), Int(info.st_mtimespec.tv_sec), Int(info.st_mtimespec.tv_nsec), Int(info.st_ino)]
        #endif
    }
}

/// A thin inotify wrapper (Linux only; nil elsewhere or when inotify is unavailable). Watches directories, so
/// that editors replacing a file by rename are seen. Used by the watcher thread only.
final class INotify {
    #if canImport(Glibc)
    private let fd: Int32
    private var watched: [String: Int32] = [:]

    init?() {
        let fd = inotify_init1(Int32(0o4000 | 0o2000000))  // IN_NONBLOCK | IN_CLOEXEC
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    /// Watches each path that is a directory, and the parent directory of each file.
    func watch(directoriesFor paths: [String]) {
        var wanted = Set<String>()
        for path in paths {
            var isDirectory = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let directory = exists && isDirectory ? path : PathText.deletingLastComponent(path)
            wanted.insert(directory.isEmpty ? "." : directory)
        }
        for (path, wd) in watched where !wanted.contains(path) {
            inotify_rm_watch(fd, wd)
            watched[path] = nil
        }
        // IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        // | IN_DELETE_SELF | IN_MOVE_SELF
        let mask: UInt32 = 0x002 | 0x004 | 0x008 | 0x040 | 0x080 | 0x100 | 0x200 | 0x400 | 0x800
        for path in wanted where watched[path] == nil {
            let wd = inotify_add_watch(fd, path, mask)
            if wd >= 0 { watched[path] = wd }
        }
    }

    /// Blocks until an event arrives or the timeout passes, then drains the queue.
    func wait(milliseconds: Int) {
        var pollfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&pollfd, 1, Int32(milliseconds))
        drain()
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }

    func close() { _ = Glibc.close(fd) }
    #else
    init?() { return nil }
    func watch(directoriesFor paths: [String]) {}
    func wait(milliseconds: Int) {}
    func drain() {}
    func close() {}
    #endif
}
