#if canImport(Glibc)
import Glibc
#endif

/// File paths as text, the way NSString's path helpers spelled them (hookproxy's messages print these paths),
/// without Foundation.
public enum PathText {
    /// `directory/name`, as `appendingPathComponent` wrote it: no slash added after one that ends `directory`, none
    /// removed, nothing else normalised; an empty side gives the other.
    public static func appending(_ name: String, to directory: String) -> String {
        if name.isEmpty { return directory }
        if directory.isEmpty { return name }
        return directory.utf8.last == UInt8(ascii: "/") ? directory + name : directory + "/" + name
    }

    /// The directory part of `path`, as `deletingLastPathComponent` gave it: runs of `/` count as one and a trailing
    /// `/` is ignored; a bare name gives "", a name in the root "/". (Foundation's own crashed on a last component
    /// of one character, `--rules r` among them.)
    public static func deletingLastComponent(_ path: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(path.utf8.count)
        for byte in path.utf8 where !(byte == UInt8(ascii: "/") && bytes.last == UInt8(ascii: "/")) {
            bytes.append(byte)
        }
        if bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        if bytes == [UInt8(ascii: "/")] { return "/" }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == 0 { return "/" }
        return String(decoding: bytes[..<slash], as: UTF8.self)
    }

    /// The user's home directory, as NSHomeDirectory gave it: `$HOME` when set, else the password database's entry,
    /// else "/".
    public static var homeDirectory: String {
        if let home = getenv("HOME") { return String(cString: home) }
        guard let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir else { return "/" }
        return String(cString: directory)
    }

    /// `~/rest` with the home directory in front (as `expandingTildeInPath` did for the current user); any other
    /// path as it is.
    public static func expandingTilde(_ path: String) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        let rest = path.dropFirst(2)
        return rest.isEmpty ? homeDirectory : appending(String(rest), to: homeDirectory)
    }

    /// `path` with `.` and empty components dropped and each `..` taking the component before it away (lexically:
    /// symbolic links are not followed), `/` at the root kept. For telling two spellings of one file apart.
    public static func lexicallyNormal(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty && parts.last != ".." { parts.removeLast() } else if !path.hasPrefix("/") { parts.append(part) }
            default: parts.append(part)
            }
        }
        let joined = parts.joined(separator: "/")
        return path.hasPrefix("/") ? "/" + joined : (joined.isEmpty ? "." : joined)
    }
}
