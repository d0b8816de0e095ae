internal import CCurl
import Foundation
import ProxyModel
import Synchronization

/// Carries every upstream request through one libcurl multi handle on one dedicated thread.
///
/// The curl thread owns the multi handle and every easy handle. Other threads only enqueue commands (add, resume,
/// cancel, quit) and wake the thread with `curl_multi_wakeup`. Connections (and DNS answers) are kept in the multi
/// handle's cache and reused across client connections.
public final class UpstreamEngine: @unchecked Sendable {
    enum Command {
        case add(CurlTransfer)
        case resume(UInt64)
        case cancel(UInt64)
        case quit
    }

    public let settings: UpstreamSettings
    private let multi: UnsafeMutableRawPointer
    private let commands = Mutex<[Command]>([])
    /// Whether the curl thread has ended, and who waits for it.
    private let stopState = Mutex<(stopped: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let isRunning = Atomic<Bool>(true)

    // curl-thread state
    private var active: [UInt64: CurlTransfer] = [:]
    private let nextTransferID = Atomic<UInt64>(1)
    private var idleHandles: [CurlEasy] = []
    private static let maxIdleHandles = 128

    private static let globalInit: Void = {
        _ = curl_global_init(hp_global_default())
    }()

    public init(settings: UpstreamSettings = UpstreamSettings()) {
        _ = UpstreamEngine.globalInit
        self.settings = settings
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init returned NULL: out of memory") }
        self.multi = multi
        _ = hp_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, settings.maxCachedConnections)
        let thread = Thread { [self] in self.run() }
        thread.name = "hookproxy-curl"
        thread.start()
    }

    /// Starts carrying `request`; the delegate hears about it on the curl thread. Any thread.
    public func start(_ request: UpstreamRequest, delegate: any UpstreamTransferDelegate) -> UpstreamTransfer {
        let id = nextTransferID.wrappingAdd(1, ordering: .relaxed).oldValue
        enqueue(.add(CurlTransfer(id: id, request: request, delegate: delegate)))
        return UpstreamTransfer(id: id, engine: self)
    }

    /// Asks the curl thread to stop (aborting every transfer still running) and returns at once. Any thread.
    public func stop() {
        if isRunning.exchange(false, ordering: .acquiringAndReleasing) { enqueue(.quit) }
    }

    /// Stops the curl thread after aborting every transfer still running, and waits for it without blocking a
    /// thread (a cooperative thread blocked here would stall every task of the process). Any task; call once or more.
    public func shutdown() async {
        stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = stopState.withLock { state -> Bool in
                if !state.stopped { state.waiters.append(continuation) }
                return state.stopped
            }
            if stopped { continuation.resume() }
        }
    }

    func enqueue(_ command: Command) {
        commands.withLock { $0.append(command) }
        curl_multi_wakeup(multi)
    }

    // MARK: - curl thread

    private func run() {
        var quitting = false
        while !quitting {
            for command in commands.withLock({ queue in defer { queue.removeAll(keepingCapacity: true) }; return queue }) {
                switch command {
                case .add(let transfer): add(transfer)
                case .resume(let id): if let transfer = active[id] { resume(transfer) }
                case .cancel(let id): if let transfer = active[id] { remove(transfer, outcome: nil) }
                case .quit: quitting = true
                }
            }
            if quitting { break }
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectFinished()
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for transfer in Array(active.values) {
            remove(transfer, outcome: UpstreamOutcome(error: ProxyError(.upstreamFailed, "hookproxy: shutting down \(transfer.host)")))
        }
        idleHandles.removeAll()
        curl_multi_cleanup(multi)
        let waiters = stopState.withLock { state in
            state.stopped = true
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func add(_ transfer: CurlTransfer) {
        let easy = idleHandles.popLast() ?? CurlEasy()
        transfer.easy = easy
        do {
            try transfer.configure(easy, settings: transfer.request.settings)
            try curlCheck(curl_multi_add_handle(multi, easy.handle), "curl_multi_add_handle")
            active[transfer.id] = transfer
            transfer.state = .running(paused: false)
        } catch {
            transfer.easy = nil
            recycle(easy)
            transfer.state = .finished
            let message = "hookproxy: upstream error \(transfer.host): \(error.description)"
            transfer.delegate.didComplete(UpstreamOutcome(error: ProxyError(.upstreamFailed, message)))
        }
    }

    private func resume(_ transfer: CurlTransfer) {
        guard case .running = transfer.state, let easy = transfer.easy else { return }
        _ = easy.pause(hp_pause_cont())
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var privatePointer: UnsafeMutableRawPointer? = nil
            _ = hp_getinfo_ptr(handle, CURLINFO_PRIVATE, &privatePointer)
            guard let privatePointer else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(privatePointer).takeUnretainedValue()
            remove(transfer, outcome: transfer.outcome(for: code))
        }
    }

    /// Takes the transfer out of the multi handle; reports `outcome` unless it was cancelled.
    private func remove(_ transfer: CurlTransfer, outcome: UpstreamOutcome?) {
        guard active.removeValue(forKey: transfer.id) != nil, let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, easy.handle)
        transfer.easy = nil
        transfer.state = .finished
        if let outcome {
            // Only a complete head (its empty line seen) is a response: a connection that closed inside the head
            // is a failure, even when libcurl accepts it.
            if transfer.headParser.complete, let head = transfer.headParser.takeForDelivery() {
                transfer.delegate.didReceiveHead(head)
            }
            transfer.delegate.didComplete(outcome)
        }
        recycle(easy)
    }

    private func recycle(_ easy: CurlEasy) {
        easy.reset()
        if idleHandles.count < UpstreamEngine.maxIdleHandles { idleHandles.append(easy) }
    }
}
