/// Receives every finished exchange. Implemented by the log writers (console, JSONL, HAR).
///
/// Called on an event-loop thread once per exchange (per hop), after the client's response ended or failed.
/// Must not block: implementations queue the record and write elsewhere.
public protocol FlowRecorder: Sendable {
    func record(_ flow: FlowRecord)
    /// Flushes and closes files; called once at shutdown. May block briefly.
    func close()
}

extension FlowRecorder {
    public func close() {}
}
