import Foundation

/// Reads pipes with read(2), retrying when a signal interrupts the call. Foundation's `availableData` and
/// `readDataToEndOfFile` abort the process on EINTR, which Process's SIGCHLD handling makes likely in tests.
public enum PipeReading {
    /// Everything until end of file.
    public static func readAll(_ handle: FileHandle) -> [UInt8] {
        var result: [UInt8] = []
        while let chunk = readSome(handle) { result += chunk }
        return result
    }

    /// What is available (blocking until something is); nil at end of file or on an error.
    public static func readSome(_ handle: FileHandle) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if count > 0 { return Array(buffer[0..<count]) }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }
}
