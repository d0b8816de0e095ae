import ProxyModel

extension FlowStore {
    /// The store's contents, guarded by its lock.
    struct State {
        var flows: [Int: Flow] = [:]
        /// Ids in arrival order; `order[head...]` are the live ones (the front is dropped in batches).
        var order: [Int] = []
        var head = 0
        var weights: [Int: Int] = [:]
        var bytes = 0
        /// The change log: `changes[i]` is change number `changeBase + i`.
        var changes: [Change] = []
        var changeBase = 0
        let changeLogLimit: Int
        var watchers: [Int: Watcher] = [:]
        var nextToken = 0
        var closed = false

        init(changeLogLimit: Int) { self.changeLogLimit = changeLogLimit }

        mutating func put(_ flow: Flow, weight: Int, limits: Limits) {
            let id = flow.id
            if flows.updateValue(flow, forKey: id) == nil {
                order.append(id)
            }
            bytes += weight - (weights.updateValue(weight, forKey: id) ?? 0)
            log(.flow(id))
            // Evict the oldest until within both limits (the newest flow always stays).
            while flows.count > limits.maxFlows || (bytes > limits.maxBytes && flows.count > 1) {
                guard head < order.count else { break }
                let oldest = order[head]
                head += 1
                if flows.removeValue(forKey: oldest) != nil {
                    bytes -= weights.removeValue(forKey: oldest) ?? 0
                }
            }
            if head > 1024 && head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }

        mutating func log(_ change: Change) {
            changes.append(change)
            if changes.count > changeLogLimit * 2 {
                let drop = changes.count - changeLogLimit
                changes.removeFirst(drop)
                changeBase += drop
            }
        }
    }
}
