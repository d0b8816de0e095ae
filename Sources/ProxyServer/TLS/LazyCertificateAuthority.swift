import FoundationEssentials
import ProxyModel
import Synchronization

/// The CA "on first need": loaded at once when its files exist (so a broken CA stops the start), otherwise
/// created the first time interception or the onboarding page asks for it. Thread-safe.
public final class LazyCertificateAuthority: Sendable {
    public let directory: String
    private let loaded = Mutex<CertificateAuthority?>(nil)

    public init(directory: String) {
        self.directory = directory
    }

    /// Loads the CA now if its files exist; throws when they are broken, or when the directory exists but others
    /// could write to it (`CertificateAuthority.checkDirectory`).
    public func loadIfPresent() throws(CAError) {
        try CertificateAuthority.checkDirectory(directory)
        let path = PathText.appending(CertificateAuthority.certificateFile, to: directory)
        let keyPath = PathText.appending(CertificateAuthority.keyFile, to: directory)
        guard FileManager.default.fileExists(atPath: path) || FileManager.default.fileExists(atPath: keyPath) else { return }
        _ = try get()
    }

    public func get() throws(CAError) -> CertificateAuthority {
        try loaded.withLock { (loaded) throws(CAError) -> CertificateAuthority in
            if let loaded { return loaded }
            let new = try CertificateAuthority.loadOrCreate(directory: directory)
            loaded = new
            return new
        }
    }
}
