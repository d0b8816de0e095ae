import ProxyLog
import ProxyModel
import ProxyUI

/// The running traffic viewer: its flow store (fed as one more recorder) and its API. Thread-safe; one per proxy,
/// made by `ProxyServer.start` when the configuration asks for it.
public final class Viewer: Sendable {
    public let store: FlowStore
    let api: ViewerAPI
    let redactor: Redactor

    init(settings: ViewerSettings) {
        store = FlowStore(limits: settings.limits)
        redactor = settings.redactor
        api = ViewerAPI(store: store, redactor: settings.redactor, version: HookproxyVersion.current)
    }
}
