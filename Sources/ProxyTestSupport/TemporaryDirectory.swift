import Foundation

/// A fresh directory under the system temp directory, removed with everything in it when this object goes away
/// (or on `remove()`). Any thread.
public final class TemporaryDirectory: Sendable {
    public let path: String
    public var url: URL { URL(fileURLWithPath: path) }

    public init(prefix: String = "hookproxy-test") throws {
        var template = Array((NSTemporaryDirectory() + "/\(prefix).XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else {
            throw TestSupportError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: created)
    }

    deinit { remove() }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes `contents` to `name` inside the directory (subdirectories created) and returns the full path.
    @discardableResult
    public func write(_ contents: String, to name: String, permissions: Int? = nil) throws -> String {
        try write(Array(contents.utf8), to: name, permissions: permissions)
    }

    @discardableResult
    public func write(_ bytes: [UInt8], to name: String, permissions: Int? = nil) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        if let permissions { try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: file) }
        return file
    }

    /// Writes the certificates' PEMs, concatenated, to `name` (e.g. a `--cacert` bundle or a rule's `ca_file`).
    @discardableResult
    public func writePEM(_ certificates: [TestCertificate], to name: String) throws -> String {
        try write(certificates.map(\.pem).joined(), to: name)
    }

    /// Writes a certificate's private key PEM (mode 0600) to `name`.
    @discardableResult
    public func writeKey(_ certificate: TestCertificate, to name: String) throws -> String {
        try write(certificate.privateKeyPEM, to: name, permissions: 0o600)
    }
}
