import FoundationEssentials
import ProxyModel

/// A HAR 1.2 file that is complete, valid JSON after every entry. Runs on its writer's thread only.
///
/// Layout (one entry per line, so the file can be resumed and repaired without parsing it all):
/// ```
/// {"log":{"version":"1.2","creator":{"name":"hookproxy","version":"…"},"entries":[
/// {…entry 1…}
/// ,{…entry 2…}
/// ]}}
/// ```
/// Appending entries is a single `pwrite` of `,{entry}\n` per entry (a batch: the entries that arrived together, up to
/// 1 MiB) and `]}}\n`, over the old trailer: between batches the file is valid JSON, and a process killed between two
/// writes leaves it valid. (A SIGKILL *during* that one system call
/// can leave a partial last line; reopening the file repairs it by dropping that line.)
///
/// Opening an existing file: empty → a new HAR; a HAR written by hookproxy → entries are appended to it (a torn last
/// line is dropped first, with a warning); anything else → `LogFileError` (`isForeignFile`), the file untouched.
final class HARFile: BatchingFileSink {
    static let headerStart = Array(#"{"log":{"version":"1.2","creator":{"name":"hookproxy","#.utf8)
    static let trailer = Array("]}}\n".utf8)
    static let comma = Array(",".utf8)
    static let newline = Array("\n".utf8)

    let file: LogFile
    private(set) var trailerOffset: Int
    private(set) var entryCount = 0
    private var hasEntries: Bool
    private var needsTruncate = false
    private var reportedError = false
    /// The lines being written (`,`? entry `\n`, one per entry of the batch), then the trailer. One buffer for the
    /// file's life (see `JSONWriter.reset`).
    private var json = JSONWriter()
    /// Entries in `json` not written yet: a batch goes out in one `pwrite` (`endBatch`, or at `batchBytes`).
    private var batched = 0
    static let batchBytes = 1 << 20
    private let warn: @Sendable (String) -> Void

    init(file: LogFile, creatorVersion: String, warn: @escaping @Sendable (String) -> Void = AsyncRecorder.stderr)
        throws(LogFileError) {
        self.file = file
        self.warn = warn
        let existing = try file.readAll()
        if existing.isEmpty {
            var creator = JSONWriter(capacity: 0)
            creator.string(creatorVersion)
            let header = HARFile.headerStart + Array(#""version":"#.utf8) + creator.bytes
                + Array(#"},"entries":["#.utf8) + [UInt8(ascii: "\n")]
            try file.write(header + HARFile.trailer, at: 0)
            trailerOffset = header.count
            hasEntries = false
            file.sync()
            return
        }
        guard existing.starts(with: HARFile.headerStart), let headerEnd = existing.firstIndex(of: UInt8(ascii: "\n"))
        else { throw .notHookproxyHAR(file.path) }
        let valid = existing.count >= headerEnd + 1 + HARFile.trailer.count
            && existing.suffix(HARFile.trailer.count).elementsEqual(HARFile.trailer)
            && (existing.count == headerEnd + 1 + HARFile.trailer.count
                || existing[existing.count - HARFile.trailer.count - 1] == UInt8(ascii: "\n"))
        if valid {
            trailerOffset = existing.count - HARFile.trailer.count
            hasEntries = trailerOffset > headerEnd + 1
            return
        }
        // Torn: keep every complete entry line, drop the rest, write the trailer again.
        let cut = HARFile.endOfLastCompleteEntry(existing, headerEnd: headerEnd)
        trailerOffset = cut
        hasEntries = cut > headerEnd + 1
        try file.write(HARFile.trailer, at: cut)
        try file.truncate(to: cut + HARFile.trailer.count)
        file.sync()
        warn("hookproxy: \(file.path) ended inside an entry (was hookproxy killed?); dropped \(existing.count - cut) bytes of it and appending after the last complete entry")
    }

    /// The offset just after the last line that is a whole entry (`{…}` or `,{…}`: a JSON object with startedDateTime).
    static func endOfLastCompleteEntry(_ bytes: [UInt8], headerEnd: Int) -> Int {
        var lineEnds: [Int] = []
        var index = headerEnd + 1
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            lineEnds.append(newline)
            index = newline + 1
        }
        var start = headerEnd + 1
        var lastGood = headerEnd + 1
        for end in lineEnds {
            var line = bytes[start..<end]
            if line.first == UInt8(ascii: ",") { line = line.dropFirst() }
            // (an entry has startedDateTime: a write torn after `,{` leaves `,{}` from the old trailer's `}}`)
            guard line.first == UInt8(ascii: "{"), isEntry(line) else { break }
            lastGood = end + 1
            start = end + 1
        }
        return lastGood
    }

    /// Whether `line` is JSON (as JSONSerialization read it) whose object has a `startedDateTime` member.
    static func isEntry(_ line: ArraySlice<UInt8>) -> Bool {
        let check = JSONCheck(line)
        return check.problem == nil && check.topLevelKeys.contains("startedDateTime")
    }

    func write(_ flow: FlowRecord) {
        guard flow.webSocket?.isOpening != true else { return }  // the session's end writes its one entry
        if batched == 0 { json.reset() }
        if hasEntries || batched > 0 { json.append(raw: HARFile.comma) }
        json.beginRecord()
        json.harEntry(flow)
        json.append(raw: HARFile.newline)
        batched += 1
        if json.count >= HARFile.batchBytes { endBatch() }
    }

    /// Writes the entries `write` kept, and the trailer after them, in one system call.
    func endBatch() {
        guard batched > 0 else { return }
        defer { batched = 0 }  // (a batch that failed is dropped; later ones are tried again)
        do {
            try writeLines()
        } catch {
            if !reportedError {
                reportedError = true
                warn("\(error); the entries of that batch are dropped, later ones are retried")
            }
        }
    }

    /// Writes one encoded entry and the trailer after it in one system call (after the entries kept so far).
    func append(_ entry: [UInt8]) throws(LogFileError) {
        endBatch()
        json.reset()
        if hasEntries { json.append(raw: HARFile.comma) }
        json.append(raw: entry)
        json.append(raw: HARFile.newline)
        batched = 1
        defer { batched = 0 }
        try writeLines()
    }

    /// Writes the `batched` entry lines in `json` (each after its comma, if any, and ending in a newline) and the
    /// trailer in one system call.
    private func writeLines() throws(LogFileError) {
        let lineCount = json.count
        json.append(raw: HARFile.trailer)
        do {
            try json.withBytes { bytes throws(LogFileError) in try file.write(bytes, at: trailerOffset) }
            if needsTruncate {
                try file.truncate(to: trailerOffset + json.count)
                needsTruncate = false
            }
        } catch {
            // Leave the file valid up to the last entry if the disk lets us.
            needsTruncate = true
            try? file.write(HARFile.trailer, at: trailerOffset)
            try? file.truncate(to: trailerOffset + HARFile.trailer.count)
            throw error
        }
        trailerOffset += lineCount
        hasEntries = true
        entryCount += batched
    }
}
