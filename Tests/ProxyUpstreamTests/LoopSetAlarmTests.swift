import CEpoll
import Glibc
import NIOCore
import NIOPosix
import ProxyModel
import ProxyTestSupport
@testable import ProxyUpstream
import Synchronization
import Testing

/// A sleeping loop is woken for its curl sockets by the kernel, through its own selector (`LoopSetAlarm`), with no
/// thread between; the watcher thread serves where the kernel refuses AIO, and when the settings ask for it.
@Suite(.timeLimit(.minutes(2)))
struct LoopSetAlarmTests {
    /// Whether this kernel lets the process use AIO (a seccomp filter or `fs.aio-max-nr` may refuse it): where it
    /// does not, the engine must fall back to the thread, and the checks below that need the alarm are skipped.
    static var kernelOffersAIO: Bool {
        let context = hp_aio_open(1)
        if context != 0 { hp_aio_close(context) }
        return context != 0
    }

    /// Sequential requests to an origin that answers after a pause: the loop sleeps before each answer, and every one
    /// wakes it through the alarm; the watcher thread never starts.
    @Test func aSleepingLoopIsWokenWithoutTheWatcherThread() async throws {
        let (statistics, watcherRan) = try await Self.sequentialSlowAnswers(20, settings: UpstreamSettings())
        #expect(statistics.transfers == 20)
        #expect(statistics.wakeups >= 20)  // each answer came while the loop slept
        if Self.kernelOffersAIO {
            #expect(statistics.threadWakeups == 0)
            #expect(!watcherRan)
        }
    }

    /// The kernel stops taking the alarm's polls while the loop sleeps (`io_submit` fails): the loop hands its set
    /// to the watcher thread, and the answers after that wake it. The last read of this session's change found that
    /// the fallback took the thread without handing it the set: each answer then waited for curl's next timer.
    @Test func anAlarmThatFailsLeavesTheSetToTheWatcher() async throws {
        guard Self.kernelOffersAIO else { return }
        let (statistics, watcherRan) = try await Self.sequentialSlowAnswers(8, settings: UpstreamSettings()) { engine, i in
            if i == 2 { #expect(await engine.failAlarmsForTesting() == 1) }
        }
        #expect(statistics.transfers == 8)
        #expect(statistics.threadWakeups >= 5, "\(statistics)")
        #expect(watcherRan)
    }

    /// `count` requests one after another on one loop, each answered after 5 ms (`before` runs ahead of each);
    /// the engine's statistics, and whether its watcher thread ran.
    private static func sequentialSlowAnswers(
        _ count: Int, settings: UpstreamSettings,
        before: (UpstreamEngine, Int) async -> Void = { _, _ in }
    ) async throws -> (UpstreamStatistics, Bool) {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine(settings: settings)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        for i in 0..<count {
            await before(engine, i)
            let delegate = TestDelegate()
            let request = UpstreamRequest(head: RequestHead(method: "GET", url: ProxyURL(string: "\(origin.baseURL)/slow-head?ms=5")!),
                                          body: .none, settings: UpstreamSettings())
            _ = engine.start(request, delegate: delegate, on: loop)
            let outcome = try #require(await delegate.waitForCompletion(timeout: .seconds(10)))
            #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
            #expect(String(decoding: delegate.body, as: UTF8.self) == "slow head\n")
        }
        let result = (engine.statistics, engine.watcher.threadRunning)
        await engine.shutdown()
        try await group.shutdownGracefully()
        try await origin.shutdown()
        return result
    }

    /// `kernelWakeups: false` (and the kernel's refusal) leave it to the watcher thread: the same requests complete,
    /// each woken by the thread.
    @Test func theWatcherThreadWakesTheLoopWhenAskedTo() async throws {
        let (statistics, watcherRan) = try await Self.sequentialSlowAnswers(10, settings: UpstreamSettings(kernelWakeups: false))
        #expect(statistics.threadWakeups >= 10)
        #expect(statistics.threadWakeups == statistics.wakeups)
        #expect(watcherRan)
    }

    /// A transfer started on the loop as the engine is made, before the alarm's channel is registered there (which
    /// needs the loop): the first sleep waits for the alarm, and the answer still wakes the loop.
    @Test func aTransferStartedBeforeTheAlarmIsUpCompletes() async throws {
        let origin = try await TestOrigin.start()
        for _ in 0..<5 {
            let engine = UpstreamEngine()
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let loop = group.next()
            let delegate = TestDelegate()
            let request = UpstreamRequest(head: RequestHead(method: "GET", url: ProxyURL(string: "\(origin.baseURL)/slow-head?ms=20")!),
                                          body: .none, settings: UpstreamSettings())
            _ = try await loop.submit { engine.start(request, delegate: delegate, on: loop) }.get()
            let outcome = try #require(await delegate.waitForCompletion(timeout: .seconds(10)))
            #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
            await engine.shutdown()
            try await group.shutdownGracefully()
        }
        try await origin.shutdown()
    }

    /// Many clients on two loops, with pauses that let the loops sleep between bursts: nothing is lost between the
    /// loop's own polls and the alarm (a lost wake-up would hang a transfer until the time limit).
    @Test func burstsAndPausesLoseNoWakeUp() async throws {
        let origin = try await TestOrigin.start()
        let engine = UpstreamEngine()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for client in 0..<12 {
                let loop = group.next()
                tasks.addTask {
                    for i in 0..<25 {
                        let delegate = TestDelegate()
                        let path = (client + i) % 3 == 0 ? "/slow-head?ms=\(1 + (client * 7 + i) % 4)" : "/bytes/\(100 + i * 997)"
                        let request = UpstreamRequest(head: RequestHead(method: "GET", url: ProxyURL(string: "\(origin.baseURL)\(path)")!),
                                                      body: .none, settings: UpstreamSettings())
                        _ = engine.start(request, delegate: delegate, on: loop)
                        let outcome = try #require(await delegate.waitForCompletion(timeout: .seconds(20)))
                        #expect(outcome.error == nil, "\(outcome.error?.message ?? "")")
                        if i % 5 == 4 { try await Task.sleep(for: .milliseconds(3)) }
                    }
                }
            }
            try await tasks.waitForAll()
        }
        #expect(engine.statistics.transfers == 300)
        await engine.shutdown()
        try await group.shutdownGracefully()
        try await origin.shutdown()
    }

    /// The alarm itself, on a set holding a pipe's read end: it reports a readiness that comes after `arm` once, one
    /// that is there at `arm` at once, and nothing after `close`.
    @Test func theAlarmReportsEachArmedReadinessOnce() async throws {
        guard Self.kernelOffersAIO else { return }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let set = try #require(LoopSocketSet())
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        defer { close(pipeEnds[0]); close(pipeEnds[1]) }
        let reports = Mutex<[LoopSetAlarm.Event]>([])
        let alarm = try #require(try await LoopSetAlarm.open(for: set, on: loop) { event in
            reports.withLock { $0.append(event) }
        }.get())
        try await loop.submit {
            set.watch(pipeEnds[0], events: hp_epollin())
            #expect(alarm.arm())
        }.get()
        try await Task.sleep(for: .milliseconds(50))
        #expect(reports.withLock { $0.isEmpty })  // nothing ready yet
        var byte: UInt8 = 1
        #expect(write(pipeEnds[1], &byte, 1) == 1)
        #expect(await eventually(timeout: .seconds(5)) { reports.withLock { $0.count } == 1 })
        // Still ready (the set's entry was not taken): arming again reports at once, and once.
        try await loop.submit { #expect(alarm.arm()) }.get()
        #expect(await eventually(timeout: .seconds(5)) { reports.withLock { $0.count } == 2 })
        try await Task.sleep(for: .milliseconds(50))
        #expect(reports.withLock { $0 }.count == 2)
        try await loop.submit {
            #expect(alarm.arm())
            alarm.close()
            #expect(!alarm.arm())
        }.get()
        try await Task.sleep(for: .milliseconds(50))
        #expect(reports.withLock { $0 }.count == 2)  // closed: not reported, and no `lost`
        try await group.shutdownGracefully()
    }

    /// The loop's group shuts down under an alarm that is still open: its channel closes, and it says it is lost.
    @Test func anAlarmWhoseChannelClosesReportsItIsLost() async throws {
        guard Self.kernelOffersAIO else { return }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let set = try #require(LoopSocketSet())
        let reports = Mutex<[LoopSetAlarm.Event]>([])
        let alarm = try #require(try await LoopSetAlarm.open(for: set, on: group.next()) { event in
            reports.withLock { $0.append(event) }
        }.get())
        try await group.shutdownGracefully()
        #expect(reports.withLock { $0 }.count == 1)
        if case .lost = reports.withLock({ $0 }).first {} else { Issue.record("expected .lost, got \(reports.withLock { $0 })") }
        _ = alarm
    }
}
