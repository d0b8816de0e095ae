#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes text to a file descriptor (stdout, stderr) with `write(2)`, all of it: what `FileHandle.write` did,
/// without Foundation, and without its crash when the descriptor is closed or the pipe gone (the text is dropped).
public enum StandardStream {
    public static func write(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { bytes in
            guard let start = bytes.baseAddress else { return }
            var done = 0
            while done < bytes.count {
                let written = Glibc.write(fd, start + done, bytes.count - done)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                done += written
            }
        }
    }
}
