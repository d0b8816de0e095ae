/// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held. Never waits
/// longer than `timeout` plus one evaluation.
public func eventually(timeout: Duration = .seconds(5), interval: Duration = .milliseconds(10),
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        if try await condition() { return true }
        if clock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}
