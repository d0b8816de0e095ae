import FoundationEssentials
import Glibc

/// Why `String(contentsOfFile:)` failed, in the words Foundation's NSError gave as its failure reason
/// ("The file doesn’t exist."). nil for a directory, where NSError said only "(NSCocoaErrorDomain error 256.)":
/// the caller says "is a directory" instead.
enum FileReadFailure {
    static func reason(_ error: any Error, path: String) -> String? {
        var status = stat()
        if stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR { return nil }
        let cocoa = error as? CocoaError
        switch cocoa?.code {
        case .fileReadNoSuchFile?: return "The file doesn’t exist."
        case .fileReadNoPermission?: return "You don’t have permission."
        case .fileReadCorruptFile?: return "The file isn’t in the correct format."  // (not UTF-8)
        default:
            return systemWords(error)
        }
    }

    /// The system's words for a file operation's error (strerror of the errno under it): a CocoaError printed
    /// whole is its domain, code and user-info dictionary, in an order that changes from run to run.
    static func systemWords(_ error: any Error) -> String {
        if let posix = (error as? CocoaError)?.underlying as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        return "\(error)"
    }
}
