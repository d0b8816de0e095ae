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
}
