/// Finds request heads in the raw bytes of one connection, before NIO's decoder sees them, so the TestOrigin can
/// record (and `/headers` can return) each head exactly as it arrived. It follows only the framing (Content-Length,
/// chunked) to skip bodies; it never keeps body bytes. Event-loop thread only.
struct RawHeadScanner {
    private enum State {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd(remaining: Int)
        case trailers
        case passthrough
    }

    private var state = State.head
    private var line: [UInt8] = []
    /// Raw heads found, oldest first; the handler takes one per decoded request head.
    private(set) var heads: [[UInt8]] = []
    private static let headLimit = 1 << 20

    mutating func takeHead() -> [UInt8] {
        heads.isEmpty ? [] : heads.removeFirst()
    }

    mutating func feed(_ bytes: some Collection<UInt8>) {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            switch state {
            case .passthrough:
                return
            case .head:
                line.append(bytes[index])
                index = bytes.index(after: index)
                if line.count >= 4, line.suffix(4).elementsEqual([13, 10, 13, 10]) {
                    finishHead()
                } else if line.count > RawHeadScanner.headLimit {
                    state = .passthrough
                }
            case .fixed(let remaining):
                let available = bytes.distance(from: index, to: bytes.endIndex)
                let taken = min(available, remaining)
                index = bytes.index(index, offsetBy: taken)
                state = remaining - taken == 0 ? .head : .fixed(remaining: remaining - taken)
            case .chunkSize, .trailers:
                let byte = bytes[index]
                index = bytes.index(after: index)
                line.append(byte)
                guard byte == 10 else { continue }
                let text = String(decoding: line, as: UTF8.self).trimmedOf([" ", "\r", "\n", "\r\n", "\t"])
                line.removeAll()
                if case .trailers = state {
                    if text.isEmpty { state = .head }
                    continue
                }
                let sizeText = text.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
                guard let size = Int(sizeText.trimmedOf([" ", "\t"]), radix: 16) else {
                    state = .passthrough
                    continue
                }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let available = bytes.distance(from: index, to: bytes.endIndex)
                let taken = min(available, remaining)
                index = bytes.index(index, offsetBy: taken)
                state = remaining - taken == 0 ? .chunkDataEnd(remaining: 2) : .chunkData(remaining: remaining - taken)
            case .chunkDataEnd(let remaining):
                index = bytes.index(after: index)
                state = remaining == 1 ? .chunkSize : .chunkDataEnd(remaining: remaining - 1)
            }
        }
    }

    private mutating func finishHead() {
        let head = line
        line.removeAll()
        // Blank lines before a request line are tolerated by parsers; they are not part of the head.
        let trimmed = Array(head.drop(while: { $0 == 13 || $0 == 10 }))
        guard !trimmed.isEmpty else { return }
        heads.append(trimmed)
        let text = String(decoding: trimmed, as: UTF8.self)
        let lines = text.split(separator: "\r\n")
        if lines.first?.hasPrefix("CONNECT ") == true {
            state = .passthrough
            return
        }
        var length = 0
        var chunked = false
        for field in lines.dropFirst() {
            guard let colon = field.firstIndex(of: ":") else { continue }
            let name = field[..<colon].lowercased()
            let value = field[field.index(after: colon)...].trimmedOf([" ", "\t"]).lowercased()
            if name == "content-length" { length = Int(value) ?? 0 }
            if name == "transfer-encoding", value.hasSuffix("chunked") { chunked = true }
        }
        if chunked {
            state = .chunkSize
        } else if length > 0 {
            state = .fixed(remaining: length)
        } else {
            state = .head
        }
    }
}

extension StringProtocol {
    fileprivate func trimmedOf(_ set: Set<Character>) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
