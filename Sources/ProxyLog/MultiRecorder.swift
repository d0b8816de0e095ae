import ProxyModel

/// Hands every record to each recorder in order (e.g. console, JSONL, HAR). Each recorder queues on its own, so a
/// slow file never holds back the console. `close()` closes them in order.
public struct MultiRecorder: FlowRecorder {
    public let recorders: [any FlowRecorder]

    public init(_ recorders: [any FlowRecorder]) {
        self.recorders = recorders
    }

    public func started(_ flow: FlowRecord) {
        for recorder in recorders { recorder.started(flow) }
    }

    public func record(_ flow: FlowRecord) {
        for recorder in recorders { recorder.record(flow) }
    }

    public func close() {
        for recorder in recorders { recorder.close() }
    }
}
