/// Something a hook or rule did during an exchange, in the words the log uses.
/// `detail` never holds a secret.
public struct HookEvent: Sendable, Hashable, Codable {
    /// Which moment of the exchange produced the event.
    public enum Hook: String, Sendable, Hashable, Codable {
        case rule, redirect, challenge, trust, intercept, body, upstream
    }

    public var hook: Hook
    public var action: String
    public var detail: String

    public init(hook: Hook, action: String, detail: String = "") {
        self.hook = hook
        self.action = action
        self.detail = detail
    }

    /// The console form, e.g. `redirect followed 2 hops` or `trust rejected: no pin matched`.
    public var logText: String {
        detail.isEmpty ? action : "\(action): \(detail)"
    }
}
