/// One entry's outcome: the proxy's response, or nil when the entry was not sent.
public struct ReplayResult: Sendable {
    public var entry: ReplayEntry
    public var response: ReplayResponse?

    public init(entry: ReplayEntry, response: ReplayResponse?) {
        self.entry = entry
        self.response = response
    }
}

/// Sends entries through a client with at most `concurrency` requests in flight, and hands the results on in the
/// entries' order (each as soon as it and every entry before it are done).
public enum Replayer {
    public static func run(_ entries: [ReplayEntry], client: ReplayClient, concurrency: Int,
                           report: (ReplayResult) -> Void) async -> [ReplayResult] {
        var results = [ReplayResult?](repeating: nil, count: entries.count)
        var nextToReport = 0
        var nextToStart = 0
        await withTaskGroup(of: (Int, ReplayResult).self) { group in
            func startNext() {
                while nextToStart < entries.count {
                    let index = nextToStart
                    let entry = entries[index]
                    nextToStart += 1
                    guard entry.disposition == .send else {
                        group.addTask { (index, ReplayResult(entry: entry, response: nil)) }
                        continue
                    }
                    group.addTask { (index, ReplayResult(entry: entry, response: await client.send(entry))) }
                    return
                }
            }
            // (at most one start per entry: a --concurrency far above the entry count must not loop that often)
            var slots = max(1, concurrency)
            while slots > 0 && nextToStart < entries.count {
                startNext()
                slots -= 1
            }
            while let (index, result) = await group.next() {
                results[index] = result
                if result.response != nil { startNext() }
                while nextToReport < entries.count, let ready = results[nextToReport] {
                    report(ready)
                    nextToReport += 1
                }
            }
        }
        return results.compactMap { $0 }
    }
}
