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
        /// Where finished flows are packed (pending ones, replaced later, each get their own).
        var segments = FlowSegments()
        /// The change log: `changes[i]` is change number `changeBase + i`.
        var changes: [Change] = []
        var changeBase = 0
        /// Each kept flow's latest change number: a watcher reads a flow at its latest change only, so a flow that
        /// started and ended since the watcher's cursor is one event (as it is now), however far apart the two are.
        var latestChange: [Int: Int] = [:]
        let changeLogLimit: Int
        var watchers: [Int: Watcher] = [:]
        var nextToken = 0
        var closed = false

        init(changeLogLimit: Int) { self.changeLogLimit = changeLogLimit }

        /// Stores `flow`, evicting the oldest past the limits; returns the evicted flows, for the caller to let go
        /// of after the lock (freeing a record's headers and bodies is the costly part).
        mutating func put(_ flow: Flow, weight: Int, limits: Limits) -> [Flow] {
            let id = flow.id
            var evicted: [Flow] = []
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
                if let gone = flows.removeValue(forKey: oldest) {
                    bytes -= weights.removeValue(forKey: oldest) ?? 0
                    latestChange.removeValue(forKey: oldest)
                    evicted.append(gone)
                }
            }
            if head > 1024 && head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
            return evicted
        }

        /// The kept flows' ids in id order and the cursor of now.
        func snapshot() -> Snapshot {
            Snapshot(kept: order[head...].filter { flows[$0] != nil }.sorted(), cursor: changeBase + changes.count)
        }

        mutating func log(_ change: Change) {
            if case .flow(let id) = change { latestChange[id] = changeBase + changes.count }
            changes.append(change)
            if changes.count > changeLogLimit * 2 {
                let drop = changes.count - changeLogLimit
                changes.removeFirst(drop)
                changeBase += drop
            }
        }
    }
}
