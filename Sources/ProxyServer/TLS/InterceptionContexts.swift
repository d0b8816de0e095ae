import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// TLS server contexts for intercepted hosts, each presenting a leaf minted by the CA for that host; a bounded
/// LRU cache, so a repeated host costs no signing. Minting runs on a thread pool, never on an event loop.
/// A client whose SNI names another host than the CONNECT target gets a leaf for the SNI name.
/// A leaf (and the context presenting it) is used for the first half of its validity, then minted anew: a proxy
/// that runs for weeks never presents an expired certificate.
final class InterceptionContexts: Sendable {
    private struct Leaf {
        var chain: [NIOSSLCertificate]
        var key: NIOSSLPrivateKey
        /// Past this instant a new leaf is minted (half-way through the leaf's validity).
        var renewAt: ContinuousClock.Instant
    }

    private struct Cache {
        var contexts: [String: (context: NIOSSLContext, renewAt: ContinuousClock.Instant, lastUse: Int)] = [:]
        var leaves: [String: (leaf: Leaf, lastUse: Int)] = [:]
        var clock = 0
        var signings = 0
    }

    private let ca: LazyCertificateAuthority
    private let pool: LazyThreadPool
    private let cache = Mutex(Cache())
    /// Held while a leaf is signed (thread pool only, never an event loop).
    private let minting = Mutex<Void>(())
    let capacity: Int
    let leafLifetime: Duration

    init(ca: LazyCertificateAuthority, pool: LazyThreadPool, capacity: Int = 512,
         leafLifetime: Duration = CertificateAuthority.leafLifetime) {
        self.ca = ca
        self.pool = pool
        self.capacity = capacity
        self.leafLifetime = leafLifetime
    }

    /// How many leaves were signed so far (for tests and the log).
    var signings: Int { cache.withLock { $0.signings } }

    /// The server context for a CONNECT to `host`.
    func context(for host: String, on eventLoop: any EventLoop) -> EventLoopFuture<NIOSSLContext> {
        let key = host.lowercased()
        let now = ContinuousClock.now
        let cached = cache.withLock { cache -> NIOSSLContext? in
            cache.clock += 1
            guard let entry = cache.contexts[key], now < entry.renewAt else { return nil }
            cache.contexts[key]?.lastUse = cache.clock
            return entry.context
        }
        if let cached { return eventLoop.makeSucceededFuture(cached) }
        return pool.pool.runIfActive(eventLoop: eventLoop) { [self] in
            let leaf = try leaf(for: key)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: leaf.chain.map { .certificate($0) }, privateKey: .privateKey(leaf.key))
            configuration.applicationProtocols = NegotiatedPipeline.offeredProtocols
            configuration.sslContextCallback = { [self] values, promise in
                guard let name = values.serverHostname?.lowercased(), name != key else {
                    promise.succeed(.noChanges)
                    return
                }
                pool.pool.submit { _ in try self.leaf(for: name) }.hop(to: promise.futureResult.eventLoop)
                    .map { leaf in
                        var override = NIOSSLContextConfigurationOverride()
                        override.certificateChain = leaf.chain.map { .certificate($0) }
                        override.privateKey = .privateKey(leaf.key)
                        return override
                    }
                    .cascade(to: promise)
            }
            let context = try NIOSSLContext(configuration: configuration)
            cache.withLock { cache in
                cache.contexts[key] = (context, leaf.renewAt, cache.clock)
                if cache.contexts.count > capacity, let oldest = cache.contexts.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                    cache.contexts.removeValue(forKey: oldest.key)
                }
            }
            return context
        }
    }

    /// A cached leaf for `name`, or a newly signed one. Thread-pool only (it may wait for another thread's signing).
    private func leaf(for name: String) throws -> Leaf {
        if let cached = cachedLeaf(name) { return cached }
        // Connections racing for a new host must not each sign: minting is serialised and the cache re-checked
        // under the lock, so the losers of the race take the winner's leaf.
        return try minting.withLock { _ in
            if let cached = cachedLeaf(name) { return cached }
            return try mint(name)
        }
    }

    private func cachedLeaf(_ name: String) -> Leaf? {
        let now = ContinuousClock.now
        return cache.withLock { cache -> Leaf? in
            cache.clock += 1
            guard let entry = cache.leaves[name], now < entry.leaf.renewAt else { return nil }
            cache.leaves[name]?.lastUse = cache.clock
            return entry.leaf
        }
    }

    private func mint(_ name: String) throws -> Leaf {
        let start = ContinuousClock.now
        let minted = try ca.get().mintLeaf(for: name, lifetime: leafLifetime)
        let leaf = Leaf(chain: minted.chain, key: minted.key, renewAt: start + minted.validFor / 2)
        cache.withLock { cache in
            cache.signings += 1
            cache.leaves[name] = (leaf, cache.clock)
            if cache.leaves.count > capacity, let oldest = cache.leaves.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                cache.leaves.removeValue(forKey: oldest.key)
            }
        }
        return leaf
    }
}

extension NIOThreadPool {
    /// `runIfActive` without an event loop of its own: the caller hops.
    fileprivate func submit<T: Sendable>(_ body: @escaping @Sendable (NIOThreadPool.WorkItemState) throws -> T) -> EventLoopFuture<T> {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        return runIfActive(eventLoop: loop) { try body(.active) }
    }
}
