import ProxyLog
import ProxyUI

/// `hookproxy run`'s traffic viewer: on unless `--no-ui`; `--ui-flows N` bounds its store; the redactor is the one
/// the log files use (`--log-secrets`, `--redact-query`), so the viewer shows what the logs would. A value.
public struct ViewerSettings: Sendable {
    public var limits: FlowStore.Limits
    public var redactor: Redactor

    public init(limits: FlowStore.Limits = FlowStore.Limits(), redactor: Redactor = Redactor()) {
        self.limits = limits
        self.redactor = redactor
    }
}
