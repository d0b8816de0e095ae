#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a log file (`--har`, `--jsonl`) cannot be opened or written, in words a user can act on.
/// `description` is the whole message, starting `hookproxy: `.
public struct LogFileError: Error, Sendable, Hashable, CustomStringConvertible {
    enum Code: Sendable, Hashable {
        case directoryMissing, permissionDenied, isDirectory, locked, notHookproxyHAR, io
    }

    let code: Code
    /// The file the error is about.
    public let path: String
    public let description: String

    /// Another hookproxy holds the file's lock.
    public var isLocked: Bool { code == .locked }
    /// The directory the file should be in does not exist.
    public var isDirectoryMissing: Bool { code == .directoryMissing }
    /// The file or its directory may not be written by this user.
    public var isPermissionDenied: Bool { code == .permissionDenied }
    /// `--har` names a non-empty file that is not a HAR written by hookproxy (it is left untouched).
    public var isForeignFile: Bool { code == .notHookproxyHAR }

    static func directoryMissing(_ path: String, directory: String) -> LogFileError {
        LogFileError(code: .directoryMissing, path: path,
                     description: "hookproxy: cannot create \(path): directory \(directory) does not exist")
    }

    static func permissionDenied(_ path: String) -> LogFileError {
        LogFileError(code: .permissionDenied, path: path,
                     description: "hookproxy: cannot write \(path): permission denied (check the file's and its directory's owner and mode)")
    }

    static func isDirectory(_ path: String) -> LogFileError {
        LogFileError(code: .isDirectory, path: path, description: "hookproxy: \(path) is a directory; give a file path")
    }

    static func locked(_ path: String, pid: Int32?) -> LogFileError {
        let holder = pid.map { " (pid \($0))" } ?? ""
        return LogFileError(code: .locked, path: path,
                            description: "hookproxy: \(path) is being written by another hookproxy\(holder); stop it or choose another file")
    }

    static func notHookproxyHAR(_ path: String) -> LogFileError {
        LogFileError(code: .notHookproxyHAR, path: path,
                     description: "hookproxy: \(path) exists and is not a HAR file written by hookproxy; it was left untouched: move it away or choose another file")
    }

    static func io(_ path: String, _ what: String, errno code: Int32) -> LogFileError {
        LogFileError(code: .io, path: path, description: "hookproxy: \(what) \(path): \(String(cString: strerror(code)))")
    }
}
