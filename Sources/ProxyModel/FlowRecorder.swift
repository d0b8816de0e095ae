/// Receives every finished exchange. Implemented by the log writers (console, JSONL, HAR).
///
/// Called on an event-loop thread once per exchange (per hop), after the client's response ended or failed.
/// Must not block: implementations queue the record and write elsewhere.
public protocol FlowRecorder: Sendable {
    /// An exchange began: `flow` has its request and no response yet; its `id` is the one its hop-0 record will
    /// carry. Only the traffic viewer listens (to show it as pending); the log writers ignore it. Called on an
    /// event-loop thread; must not block.
    func started(_ flow: FlowRecord)
    func record(_ flow: FlowRecord)
    /// Flushes and closes files; called once at shutdown. May block briefly.
    func close()
}

extension FlowRecorder {
    public func started(_ flow: FlowRecord) {}
    public func close() {}
}
