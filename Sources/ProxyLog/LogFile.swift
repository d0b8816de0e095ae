import FoundationEssentials
import ProxyModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open log file held under an exclusive `flock`, so that two hookproxy processes never write the same file.
/// Owned by one writer thread after opening; not thread-safe.
final class LogFile {
    let path: String
    let fd: Int32
    private var closed = false
    /// Where the file ended before an `appendWhole` that failed part way, when cutting it back failed too.
    private var uncutEnd: Int?

    /// Opens (creating with mode 0600: traffic logs hold bodies and headers) `path` for reading and writing, and takes
    /// the lock without waiting. `append` opens with `O_APPEND`.
    init(path: String, append: Bool) throws(LogFileError) {
        self.path = path
        var flags = O_RDWR | O_CREAT | O_CLOEXEC
        if append { flags |= O_APPEND }
        let fd = open(path, flags, 0o600)
        guard fd >= 0 else { throw LogFile.openError(path, errno: errno) }
        // A lock this process holds itself is on its way out: a file it just closed is still open in a child it
        // forked, between the fork and the exec that closes it (O_CLOEXEC). That takes microseconds, up to a few
        // milliseconds on a busy machine; wait up to half a second for it rather than call it another hookproxy.
        // A holder that cannot be told is waited for too: /proc/locks is read in pieces, and while other locks come
        // and go (a busy test run) a line can slip between two reads.
        var waits = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            let holders = LogFile.lockHolders(fd: fd)
            if code == EWOULDBLOCK, waits < 100, holders.allSatisfy({ $0 == getpid() }) {
                waits += 1
                usleep(5_000)
                continue
            }
            Glibc.close(fd)
            if code == EWOULDBLOCK { throw .locked(path, pid: holders.first { $0 != getpid() }) }
            throw .io(path, "cannot lock", errno: code)
        }
        self.fd = fd
    }

    deinit { close() }

    var size: Int {
        var info = stat()
        return fstat(fd, &info) == 0 ? Int(info.st_size) : 0
    }

    /// Reads the whole file.
    func readAll() throws(LogFileError) -> [UInt8] { try read(from: 0, to: size) }

    /// Writes all of `bytes` at `offset` (nil: at the end with O_APPEND / the current position) in as few system calls
    /// as the kernel allows.
    func write(_ bytes: [UInt8], at offset: Int? = nil) throws(LogFileError) {
        let written = bytes.withUnsafeBytes { buffer in Result { () throws(LogFileError) in try write(buffer, at: offset) } }
        try written.get()
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int? = nil) throws(LogFileError) {
        var written = 0
        try write(bytes, at: offset, written: &written)
    }

    /// `written`: the bytes that reached the file, also when it throws part way.
    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int?, written done: inout Int) throws(LogFileError) {
        guard let start = bytes.baseAddress else { return }
        while done < bytes.count {
            let n = offset.map { pwrite(fd, start + done, bytes.count - done, off_t($0 + done)) }
                ?? Glibc.write(fd, start + done, bytes.count - done)
            if n < 0 { if errno == EINTR { continue }; throw .io(path, "cannot write", errno: errno) }
            done += n
        }
    }

    /// Appends all of `bytes` (`O_APPEND`) or none of them: when the disk fills part way (write(2) takes part of
    /// them, then fails with ENOSPC), the part that got in is cut off again, so the file ends where it did before the
    /// call. A cut that fails is made before the next append, which is dropped when it fails again.
    func appendWhole(_ bytes: UnsafeRawBufferPointer) throws(LogFileError) {
        if let end = uncutEnd {
            try truncate(to: end)
            uncutEnd = nil
        }
        var written = 0
        do {
            try write(bytes, at: nil, written: &written)
        } catch {
            if written > 0 {
                let end = max(0, size - written)
                if (try? truncate(to: end)) == nil { uncutEnd = end }
            }
            throw error
        }
    }

    /// The bytes after the file's last newline (all of it when it has none), read back from the end in 64 KiB
    /// steps up to `limit` bytes; nil when the tail is longer than that.
    func tailAfterLastNewline(limit: Int) throws(LogFileError) -> [UInt8]? {
        let size = self.size
        var end = size
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while end > 0 {
            let start = max(0, end - chunk.count, size - limit - 1)
            if start >= end { return nil }
            let count = end - start
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, off_t(start)) }
            if n < 0 { if errno == EINTR { continue }; throw .io(path, "cannot read", errno: errno) }
            if n < count { throw .io(path, "cannot read", errno: EIO) }
            if let newline = chunk[0..<count].lastIndex(of: UInt8(ascii: "\n")) {
                return try read(from: start + newline + 1, to: size)
            }
            end = start
        }
        return size <= limit ? try read(from: 0, to: size) : nil
    }

    /// The bytes from `start` up to `end`, or to the end of the file when it is shorter.
    private func read(from start: Int, to end: Int) throws(LogFileError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, end - start))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(start + done)) }
            if n < 0 { if errno == EINTR { continue }; throw .io(path, "cannot read", errno: errno) }
            if n == 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    func truncate(to length: Int) throws(LogFileError) {
        if ftruncate(fd, off_t(length)) != 0 { throw .io(path, "cannot truncate", errno: errno) }
    }

    func sync() { _ = fdatasync(fd) }

    func close() {
        guard !closed else { return }
        closed = true
        _ = fdatasync(fd)
        Glibc.close(fd) // closing releases the flock
    }

    static func openError(_ path: String, errno code: Int32) -> LogFileError {
        switch code {
        case ENOENT, ENOTDIR:
            let parent = PathText.deletingLastComponent(path)
            let directory = parent.isEmpty ? "." : parent
            // A directory that exists but takes no new files (/proc, /sys) answers ENOENT too: say what the
            // system said rather than blame a missing directory.
            var info = stat()
            if stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return .io(path, "cannot create", errno: code) }
            return .directoryMissing(path, directory: directory)
        case EACCES, EPERM, EROFS: return .permissionDenied(path)
        case EISDIR: return .isDirectory(path)
        default: return .io(path, "cannot open", errno: code)
        }
    }

    /// The pid holding a flock on the file other than this process, from /proc/locks (Linux); nil when it cannot be
    /// told.
    static func lockHolder(fd: Int32) -> Int32? {
        lockHolders(fd: fd).first { $0 != getpid() }
    }

    /// The pids /proc/locks names for flocks on the file (the pid that took each lock; a child forked since holds it
    /// too, under its parent's pid); empty when it cannot be told.
    static func lockHolders(fd: Int32) -> [Int32] {
        var info = stat()
        guard fstat(fd, &info) == 0, let locks = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else {
            return []
        }
        let device = UInt64(info.st_dev)
        // glibc's encoding of dev_t (gnu_dev_major / gnu_dev_minor are macros Swift does not import)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let key = hex(major) + ":" + hex(minor) + ":" + String(UInt64(info.st_ino))  // "%02llx:%02llx:%llu"
        var pids: [Int32] = []
        for line in locks.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"
            guard fields.count >= 6, fields[1] == "FLOCK", fields[5] == key, let pid = Int32(fields[4]) else { continue }
            pids.append(pid)
        }
        return pids
    }

    /// `%02llx`: lower-case hex, at least two digits.
    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return digits.count < 2 ? "0" + digits : digits
    }
}
