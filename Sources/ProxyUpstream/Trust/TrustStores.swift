internal import COpenSSL
#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// OpenSSL certificate stores, built once and shared: the system store and one per `ca_file` version.
/// X509_STORE is reference counted and safe for concurrent verification once built.
final class TrustStores: @unchecked Sendable {
    /// A `ca_file` as it is on disk now: a replaced or edited file is another version, so a rule set that names it
    /// (reloaded or not) is judged with what the file holds, never with a copy read at some earlier time.
    private struct Version: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: timespec

        static func == (a: Version, b: Version) -> Bool {
            a.device == b.device && a.inode == b.inode && a.size == b.size
                && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
        }
    }

    private let lock = Mutex<Void>(())
    private var system: OpaquePointer?
    private var files: [String: (version: Version, store: OpaquePointer)] = [:]

    static let shared = TrustStores()

    /// A new reference (free it with X509_STORE_free) to the store for `caFile` as the file is now, or to the
    /// system's default store when nil; nil when the file cannot be read.
    func store(caFile: String?) -> OpaquePointer? {
        guard let caFile else {
            return lock.withLock { _ in
                if system == nil { system = TrustStores.load { X509_STORE_set_default_paths($0) == 1 } }
                return TrustStores.retained(system)
            }
        }
        var info = stat()
        guard stat(caFile, &info) == 0 else { return nil }
        let version = Version(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                              modified: info.st_mtim)
        return lock.withLock { _ in
            if let cached = files[caFile], cached.version == version { return TrustStores.retained(cached.store) }
            guard let store = TrustStores.load({ X509_STORE_load_file($0, caFile) == 1 }) else { return nil }
            if let old = files[caFile] { X509_STORE_free(old.store) }  // verifications still using it hold their own reference
            files[caFile] = (version, store)
            return TrustStores.retained(store)
        }
    }

    private static func load(_ fill: (OpaquePointer) -> Bool) -> OpaquePointer? {
        guard let store = X509_STORE_new() else { return nil }
        let loaded = fill(store)
        ERR_clear_error()
        guard loaded else {
            X509_STORE_free(store)
            return nil
        }
        return store
    }

    private static func retained(_ store: OpaquePointer?) -> OpaquePointer? {
        guard let store, X509_STORE_up_ref(store) == 1 else { return nil }
        return store
    }

    /// A fresh store whose only trust anchors are `certificates` (for `certificate` pinning).
    static func anchors(_ certificates: [X509Certificate]) -> OpaquePointer? {
        guard let store = X509_STORE_new() else { return nil }
        for certificate in certificates { X509_STORE_add_cert(store, certificate.pointer) }
        ERR_clear_error()
        return store
    }
}

