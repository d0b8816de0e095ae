import Synchronization
import FoundationEssentials
import ProxyModel

/// Holds the current RuleSet and swaps it on reload. Thread-safe: `current` may be read from any thread
/// (event loops), reloads happen on the watcher's own thread.
public final class RuleStore: Sendable {
    /// The `--rules` paths, as given.
    public let paths: [String]
    let environment: [String: String]
    /// The paths that were directories at start: one that disappears is an error on reload, not "no rules".
    let directories: Set<String>
    private let snapshot: Locked<RuleSet>
    private let watcher = Locked<RuleWatcher?>(nil)
    /// The state of the watched files as the last load attempt saw them (taken before reading), so a change made
    /// between a load and the start of watching is not missed.
    let lastSeen: Locked<Fingerprint>

    /// Loads the rules once.
    /// - Throws: `RuleLoadFailure` with every error; the proxy should print them and exit 1.
    public init(paths: [String], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(RuleLoadFailure) {
        self.paths = paths
        self.environment = environment
        directories = Set(paths.filter { path in
            var isDirectory = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory
        })
        let before = Fingerprint.of(paths)
        let set = try RuleLoader.load(paths: paths, environment: environment)
        self.snapshot = Locked(set)
        self.lastSeen = Locked(before.merging(Fingerprint.of(set.dependencies)))
    }

    /// The snapshot in force now. A flow should read it once and keep it.
    public var current: RuleSet { snapshot.value }

    /// Loads the rules again now. On success the new snapshot replaces the old one atomically; on failure the old
    /// one stays in force and the failure (every error) is returned.
    @discardableResult
    public func reload() -> Result<RuleSet, RuleLoadFailure> {
        let before = Fingerprint.of(paths)
        do throws(RuleLoadFailure) {
            let set = try RuleLoader.load(paths: paths, environment: environment, missingFilesAreErrors: false,
                                          directories: directories)
            snapshot.value = set
            lastSeen.value = before.merging(Fingerprint.of(set.dependencies))
            return .success(set)
        } catch {
            lastSeen.value = before.merging(Fingerprint.of(current.dependencies))
            return .failure(error)
        }
    }

    /// Watches the rule files, their directories and the files they reference (mocks, certificates) and reloads
    /// within about a second of a change: inotify on Linux wakes the watcher at once; a stat-based scan every
    /// 250 ms is the fallback (and the only mechanism where inotify is unavailable).
    ///
    /// `onReload` runs on the watcher's thread after each reload attempt caused by a change: `.success` with the
    /// new snapshot (already in force), or `.failure` with every error (the old rules stay in force). It may log;
    /// it should not block for long. Calling `startWatching` again replaces the previous watcher.
    public func startWatching(onReload: @escaping @Sendable (Result<RuleSet, RuleLoadFailure>) -> Void) {
        let new = RuleWatcher(store: self, onReload: onReload)
        let old = watcher.exchange(new)
        old?.stop()
        new.start()
    }

    /// Stops watching; no `onReload` call starts after this returns.
    public func stopWatching() {
        watcher.exchange(nil)?.stop()
    }

    /// Paths whose change should trigger a reload: the given paths plus the current rules' referenced files.
    var watchedPaths: [String] { paths + current.dependencies }
}

/// A value behind a lock (a `Mutex` that can be shared by reference).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }

    func exchange(_ new: Value) -> Value {
        mutex.withLock { stored in
            defer { stored = new }
            return stored
        }
    }

    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T {
        mutex.withLock { body(&$0) }
    }
}
