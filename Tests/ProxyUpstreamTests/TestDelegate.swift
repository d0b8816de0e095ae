import Foundation
import NIOCore
import NIOPosix
import ProxyModel
import ProxyTestSupport
import ProxyUpstream
import Synchronization

/// Receives one transfer's callbacks (the transfer's event loop) and lets the test read what arrived (test thread).
final class TestDelegate: UpstreamTransferDelegate, Sendable {
    struct State {
        var heads: [ResponseHead] = []
        var body: [UInt8] = []
        var bodyCallbacks = 0
        var outcome: UpstreamOutcome?
        var completions = 0
        var sent = 0
        var requestPauses = 0
    }

    /// What to answer the body callback: nil takes the bytes.
    typealias BodyHook = @Sendable (_ callback: Int, _ transfer: UpstreamTransfer?) -> BodyFlow?

    let state = Mutex(State())
    /// The request body to provide (`pattern`), if any.
    let requestBodyCount: Int
    /// Pause the request body every this many read callbacks (resumed from another thread); 0 never.
    let pauseRequestEvery: Int
    let bodyHook: BodyHook?
    let transferBox = Mutex<UpstreamTransfer?>(nil)

    init(requestBodyCount: Int = 0, pauseRequestEvery: Int = 0, bodyHook: BodyHook? = nil) {
        self.requestBodyCount = requestBodyCount
        self.pauseRequestEvery = pauseRequestEvery
        self.bodyHook = bodyHook
    }

    var transfer: UpstreamTransfer? { transferBox.withLock { $0 } }
    var head: ResponseHead? { state.withLock { $0.heads.last } }
    var heads: [ResponseHead] { state.withLock { $0.heads } }
    var body: [UInt8] { state.withLock { $0.body } }
    var bodyText: String { String(decoding: body, as: UTF8.self) }
    var outcome: UpstreamOutcome? { state.withLock { $0.outcome } }
    var completions: Int { state.withLock { $0.completions } }

    func didReceiveHead(_ head: ResponseHead) {
        state.withLock { $0.heads.append(head) }
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyFlow {
        let callback = state.withLock { state in
            state.bodyCallbacks += 1
            return state.bodyCallbacks
        }
        if let hook = bodyHook, let answer = hook(callback, transfer) {
            if case .pause = answer { return .pause }
        }
        state.withLock { $0.body.append(contentsOf: bytes) }
        return .bytes(bytes.count)
    }

    func provideRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> BodyFlow {
        let (sent, pause) = state.withLock { state -> (Int, Bool) in
            state.requestPauses += 1
            let pause = pauseRequestEvery > 0 && state.requestPauses % pauseRequestEvery == 0
            return (state.sent, pause)
        }
        if pause {
            let transfer = self.transfer
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { transfer?.resume() }
            return .pause
        }
        let count = min(buffer.count, requestBodyCount - sent, 10_000 + sent % 7_001)
        guard count > 0 else { return .end }
        for i in 0..<count { buffer[i] = UInt8((sent + i) % 251) }
        state.withLock { $0.sent += count }
        return .bytes(count)
    }

    func didComplete(_ outcome: UpstreamOutcome) {
        state.withLock {
            $0.outcome = outcome
            $0.completions += 1
        }
    }

    /// Waits (bounded) for `didComplete`.
    func waitForCompletion(timeout: Duration = .seconds(30)) async -> UpstreamOutcome? {
        _ = await eventually(timeout: timeout) { outcome != nil }
        return outcome
    }
}

extension UpstreamEngine {
    /// The loops test transfers run on. Each engine keeps to one of them (so its transfers share one connection
    /// cache, as a client connection's do in the proxy), and different engines spread over them, so the tests that
    /// run at once do not all queue on one thread (as they did not on the old per-engine curl threads).
    static let testLoops: [any EventLoop] = Array(MultiThreadedEventLoopGroup(numberOfThreads: 4).makeIterator())

    /// This engine's loop among `testLoops`.
    var testLoop: any EventLoop {
        let index = UInt(bitPattern: ObjectIdentifier(self).hashValue) % UInt(UpstreamEngine.testLoops.count)
        return UpstreamEngine.testLoops[Int(index)]
    }

    /// Starts `method url` with `delegate` and remembers the transfer in the delegate.
    @discardableResult
    func start(_ method: String, _ url: String, body: UpstreamRequest.Body = .none, headers: HeaderFields = [],
               settings: UpstreamSettings = UpstreamSettings(), delegate: TestDelegate) -> UpstreamTransfer {
        let request = UpstreamRequest(head: RequestHead(method: method, url: ProxyURL(string: url)!, headers: headers),
                                      body: body, settings: settings)
        // The box is filled under its lock before the callbacks can need it (they read it lazily).
        return delegate.transferBox.withLock { box in
            let transfer = start(request, delegate: delegate, on: testLoop)
            box = transfer
            return transfer
        }
    }
}
