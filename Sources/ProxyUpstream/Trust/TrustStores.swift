import COpenSSL

/// OpenSSL certificate stores, built once and shared: the system store and one per `ca_file`.
/// X509_STORE is reference counted and safe for concurrent verification once built.
final class TrustStores: @unchecked Sendable {
    private let lock = NSLockLike()
    private var stores: [String: OpaquePointer] = [:]

    static let shared = TrustStores()

    /// The store for `caFile`, or the system's default store when nil; nil when the file cannot be read.
    func store(caFile: String?) -> OpaquePointer? {
        let key = caFile ?? ""
        return lock.withLock {
            if let existing = stores[key] { return existing }
            guard let store = X509_STORE_new() else { return nil }
            let loaded = caFile.map { X509_STORE_load_file(store, $0) == 1 } ?? (X509_STORE_set_default_paths(store) == 1)
            ERR_clear_error()
            guard loaded else {
                X509_STORE_free(store)
                return nil
            }
            stores[key] = store
            return store
        }
    }

    /// A fresh store whose only trust anchors are `certificates` (for `certificate` pinning).
    static func anchors(_ certificates: [X509Certificate]) -> OpaquePointer? {
        guard let store = X509_STORE_new() else { return nil }
        for certificate in certificates { X509_STORE_add_cert(store, certificate.pointer) }
        ERR_clear_error()
        return store
    }
}

/// A minimal mutex without Foundation, for the C-adjacent code.
final class NSLockLike: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body()
    }
}
