import ProxyModel
import Synchronization

/// Keeps every FlowRecord it is given, for assertions.
public final class RecordingRecorder: FlowRecorder, Sendable {
    private let box = Mutex<[FlowRecord]>([])
    public init() {}
    public func record(_ flow: FlowRecord) { box.withLock { $0.append(flow) } }
    public var records: [FlowRecord] { box.withLock { $0 } }

    /// Waits (bounded) until at least `count` records arrived.
    public func waitFor(count: Int, timeout: Duration = .seconds(10)) async -> [FlowRecord] {
        let deadline = ContinuousClock.now + timeout
        while records.count < count && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return records
    }
}
