internal import CCurl
internal import CEpoll
import Glibc
import NIOCore
import ProxyModel

/// One libcurl multi handle, driven by one event loop through curl's socket API.
///
/// Everything about it runs on `loop`: adding, pausing, resuming and removing transfers, every curl callback (so a
/// transfer's delegate hears from curl on the same thread as the client connection that started it), and each
/// `curl_multi_socket_action`, which touches only the socket that is ready (not every transfer, as
/// `curl_multi_perform` would). The loop polls its own set of curl's sockets while it is busy; while it sleeps, the
/// kernel wakes it through its own selector when the set becomes ready (`LoopSetAlarm`), or, where the kernel refuses
/// that, the `SocketWatcher` thread does. curl's timer becomes a scheduled task on the loop. Cached connections (and DNS answers) live in the multi handle, so a client connection's
/// requests reuse the upstream connections of earlier requests on the same loop.
///
/// `@unchecked Sendable`: its mutable state is touched only on `loop` (asserted); other threads reach it only by
/// `perform`, which hops to the loop.
final class LoopEngine: @unchecked Sendable {
    let loop: any EventLoop
    private let multi: UnsafeMutableRawPointer
    private let watcher: SocketWatcher
    private let socketSet: LoopSocketSet
    private let statistics: UpstreamStatisticsCounter
    private var index: UInt32 = 0

    // MARK: loop state
    private var active: [UInt64: CurlTransfer] = [:]
    private var idleHandles: [CurlEasy] = []
    private static let maxIdleHandles = 128
    /// The sockets curl asked to watch, and whether each is armed in the watcher (one-shot registrations).
    private var sockets: [Int32: (events: UInt32, armed: Bool)] = [:]
    /// Connections curl made and handed over (connect-only transfers), by socket: their readiness is theirs.
    private var handedOver: [Int32: UpstreamConnection] = [:]
    /// Idle HTTP/1 connections in curl's cache, watched for bytes no request asked for (see `idleConnectionSpoke`):
    /// socket → its local port, and back.
    private var idleSockets: [Int32: Int] = [:]
    private var idlePorts: [Int: Int32] = [:]
    /// The transfer that took the connection with this local port last (`connectionTaken`), until it ends.
    private var portHolders: [Int: UInt64] = [:]
    /// How many running transfers hold the connection with this local port (HTTP/2 ones share one).
    private var portUsers: [Int: Int] = [:]
    /// The transfer that may pause because it is alone on the connection with this local port (`mayPauseAlone`).
    private var lonePausers: [Int: CurlTransfer] = [:]
    private static let idleEvents = hp_epollin() | hp_epollrdhup()
    /// True while the loop itself polls `socketSet` (a poll is queued as its next task); false while `waker` waits
    /// on the set for it.
    private var polling = false
    /// What wakes the loop while it sleeps: the kernel's alarm once it is set up, else the watcher thread.
    private var waker = Waker.starting
    private enum Waker {
        /// The alarm's channel is being registered: the first sleep waits for it.
        case starting
        case alarm(LoopSetAlarm)
        /// The watcher thread (the kernel refused an alarm, or the settings ask for the thread).
        case thread
    }
    /// Polls in a row that found nothing: at `idlePollsBeforeSleep` the loop hands the set back to the watcher.
    private var idlePolls = 0
    private static let idlePollsBeforeSleep = 2
    /// Polls in a row that found work: at `busyPollsBeforeYield` the loop lets NIO read its own sockets first.
    /// NIO runs a task queued by a task in the same pass, before it looks at any socket, so a poll that queues
    /// itself after every find would keep the loop from its clients for as long as one of curl's sockets stays
    /// ready: libcurl 7.88 asks for POLLOUT on an HTTP/2 connection while a stream's send window is shut, and the
    /// socket is always writable.
    private var busyPolls = 0
    private static let busyPollsBeforeYield = 4
    /// The loop yielded with work found (the set is armed, and wakes it in NIO's next pass): not a wake-up to count.
    private var yielded = false
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// True while curl runs (inside it, transfers must not be added or removed: those wait for the next turn).
    private var insideCurl = false
    private var stopped = false
    private var multiFreed = false

    /// Nil when the process is out of file descriptors (or memory): the socket set needs an epoll descriptor, and
    /// curl's multi handle a socket pair to wake itself.
    init?(loop: any EventLoop, settings: UpstreamSettings, watcher: SocketWatcher, statistics: UpstreamStatisticsCounter) {
        self.loop = loop
        self.watcher = watcher
        self.statistics = statistics
        guard let socketSet = LoopSocketSet() else { return nil }
        guard let multi = curl_multi_init() else { return nil }
        self.socketSet = socketSet
        self.multi = multi
        _ = hp_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, settings.maxCachedConnections)
        // HTTP/2 upstreams: streams share one connection per origin (and trust policy, see CurlTransfer+Trust).
        _ = hp_multi_setopt_long(multi, CURLMOPT_PIPELINING, hp_pipe_multiplex())
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = hp_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        _ = hp_multi_setopt_socket_callback(multi) { _, socket, what, context, _ in
            Unmanaged<LoopEngine>.fromOpaque(context!).takeUnretainedValue().curlWatches(socket, what: what)
            return 0
        }
        _ = hp_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
        _ = hp_multi_setopt_timer_callback(multi) { _, timeoutMs, context in
            Unmanaged<LoopEngine>.fromOpaque(context!).takeUnretainedValue().curlWantsTimer(in: timeoutMs)
            return 0
        }
        if settings.kernelWakeups {
            LoopSetAlarm.open(for: socketSet, on: loop) { [weak self] event in self?.alarmReported(event) }
                .whenSuccess { [weak self] alarm in self?.alarmOpened(alarm) }
        } else {
            loop.execute { [self] in alarmOpened(nil) }
        }
    }

    /// Runs `work` on the loop: now when called there outside curl, else as the loop's next task. Any thread.
    func perform(_ work: @escaping @Sendable (LoopEngine) -> Void) {
        if loop.inEventLoop && !insideCurl {
            work(self)
        } else {
            loop.execute { work(self) }
        }
    }

    // MARK: - commands (loop)

    func add(_ transfer: CurlTransfer) {
        loop.assertInEventLoop()
        if stopped {
            transfer.state = .finished
            transfer.delegate.didComplete(UpstreamOutcome(error: UpstreamEngine.shuttingDown(transfer.host)))
            return
        }
        let easy = idleHandles.popLast() ?? CurlEasy()
        transfer.easy = easy
        do {
            try transfer.configure(easy, settings: transfer.request.settings)
            try watchConnections(easy, for: transfer)
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

    func resume(_ id: UInt64) {
        loop.assertInEventLoop()
        guard let transfer = active[id], case .running = transfer.state, let easy = transfer.easy else { return }
        // Unpausing may deliver buffered bytes at once, through the body callback.
        transfer.idleClock.resumed()
        runCurl { _ = easy.pause(hp_pause_cont()) }
    }

    func cancel(_ id: UInt64) {
        loop.assertInEventLoop()
        if let transfer = active[id] { remove(transfer, outcome: nil) }
    }

    /// Aborts every transfer still running (each hears a shutdown error) and frees the multi handle. Once.
    func stop() {
        loop.assertInEventLoop()
        guard !stopped else { return }
        stopped = true
        timer?.cancel()
        timer = nil
        for transfer in Array(active.values) {
            remove(transfer, outcome: UpstreamOutcome(error: UpstreamEngine.shuttingDown(transfer.host)))
        }
        for connection in Array(handedOver.values) {
            let delegate = connection.delegate
            connection.finish()
            delegate?.upstreamClosed(UpstreamEngine.shuttingDown("the upstream"))
        }
        idleHandles.removeAll()
        multiFreed = true
        curl_multi_cleanup(multi)  // closes the cached connections (each one's socket callback forgets it)
        for socket in sockets.keys { socketSet.forget(socket) }
        sockets.removeAll()
        idleSockets.removeAll()
        idlePorts.removeAll()
        portHolders.removeAll()
        switch waker {
        case .alarm(let alarm): alarm.close()
        case .thread: watcher.forget(socketSet)
        case .starting: break
        }
    }

    // MARK: - readiness and time (loop)

    /// One of the set's sockets is ready while the loop slept. The watcher thread: hops to the loop.
    func wake() {
        loop.execute { [self] in woke(byThread: true) }
    }

    /// The loop wakes for a socket of the set: it polls from now on until it finds nothing again.
    private func woke(byThread: Bool) {
        guard !polling, !stopped else { return }  // already polling (its next poll hands the set back)
        if yielded { yielded = false } else { statistics.countWakeup(byThread: byThread) }
        polling = true
        idlePolls = 0
        busyPolls = 0
        poll()
    }

    /// The loop goes to sleep: the set is left to what wakes it.
    private func sleep() {
        guard !stopped else { return }
        switch waker {
        case .starting:
            break  // (`alarmOpened` arms what it settles on)
        case .alarm(let alarm):
            if !alarm.arm() {
                alarm.close()
                useWatcherThread()
                watcher.arm(socketSet, index: index)
            }
        case .thread:
            watcher.arm(socketSet, index: index)
        }
    }

    /// The alarm's channel is up (or nil: refused, or not wanted): it, or else the watcher thread, wakes the loop
    /// from now on.
    private func alarmOpened(_ alarm: LoopSetAlarm?) {
        guard case .starting = waker, !stopped else {
            alarm?.close()
            return
        }
        if let alarm { waker = .alarm(alarm) } else { useWatcherThread() }
        if !polling { sleep() }
    }

    private func alarmReported(_ event: LoopSetAlarm.Event) {
        switch event {
        case .ready:
            woke(byThread: false)
        case .lost:
            guard case .alarm = waker else { return }
            useWatcherThread()
            if !polling { sleep() }
        }
    }

    /// Tests: makes the loop's alarm fail from now on (see `LoopSetAlarm.failForTesting`); false when it has none.
    func failAlarmForTesting() -> Bool {
        guard case .alarm(let alarm) = waker else { return false }
        alarm.failForTesting()
        return true
    }

    private func useWatcherThread() {
        waker = .thread
        index = watcher.register(self)
    }

    /// Lets curl act on every socket of the set that is ready now. While polls find work, the next poll is queued
    /// as the loop's next task, up to `busyPollsBeforeYield` in a row; then the loop yields to NIO's own sockets
    /// (see `busyPolls`). After `idlePollsBeforeSleep` empty polls the set goes back to what wakes the loop, which
    /// may sleep.
    private func poll() {
        guard !stopped else { return }
        let found = socketSet.poll { ready in handle(ready) }
        if found > 0 {
            statistics.count(readySockets: found)
            collectFinished()
        }
        idlePolls = found > 0 ? 0 : idlePolls + 1
        busyPolls = found > 0 ? busyPolls + 1 : 0
        if busyPolls < LoopEngine.busyPollsBeforeYield && idlePolls < LoopEngine.idlePollsBeforeSleep {
            loop.execute { [self] in poll() }
        } else {
            // Idle, or still busy: the set goes to what wakes the loop. Busy, the set is ready, so that wakes the
            // loop again through NIO's selector, after NIO has read its own sockets.
            yielded = busyPolls > 0
            polling = false
            sleep()
        }
    }

    private func handle(_ socket: LoopSocketSet.Ready) {
        if idleSockets[socket.socket] != nil { return idleConnectionSpoke(socket.socket) }
        if let connection = handedOver[socket.socket] {
            let readable = socket.events & (hp_epollin() | hp_epollhup() | hp_epollrdhup() | hp_epollerr()) != 0
            connection.ready(events: socket.events, readable: readable, writable: socket.events & hp_epollout() != 0)
            return
        }
        sockets[socket.socket]?.armed = false
        var mask: Int32 = 0
        if socket.events & (hp_epollin() | hp_epollhup() | hp_epollrdhup()) != 0 { mask |= hp_cselect_in() }
        if socket.events & hp_epollout() != 0 { mask |= hp_cselect_out() }
        if socket.events & hp_epollerr() != 0 { mask |= hp_cselect_err() }
        act(on: socket.socket, mask: mask)
        // Curl may have re-registered it meanwhile (armed again) or let it go (gone).
        if let watch = sockets[socket.socket], !watch.armed {
            sockets[socket.socket]?.armed = true
            socketSet.watch(socket.socket, events: watch.events)
        }
    }

    private func act(on socket: Int32, mask: Int32) {
        var running: Int32 = 0
        runCurl { _ = curl_multi_socket_action(multi, socket, mask, &running) }
    }

    /// CURLMOPT_SOCKETFUNCTION: watch `socket` for what curl wants, or stop watching it.
    private func curlWatches(_ socket: Int32, what: Int32) {
        let wasIdle = unwatchIdle(socket)  // curl takes an idle connection back
        if what == hp_poll_remove() {
            if sockets.removeValue(forKey: socket) != nil || wasIdle { socketSet.forget(socket) }
            return
        }
        var events: UInt32 = hp_epollrdhup()
        if what & hp_poll_in() != 0 { events |= hp_epollin() }
        if what & hp_poll_out() != 0 { events |= hp_epollout() }
        sockets[socket] = (events, true)
        socketSet.watch(socket, events: events)
    }

    /// CURLMOPT_TIMERFUNCTION: curl wants `socket_action(TIMEOUT)` in `timeoutMs` (-1: no timer needed).
    /// A timer already due earlier stays: firing early is harmless (curl only sets the next one then).
    private func curlWantsTimer(in timeoutMs: Int) {
        guard !stopped else { return }
        guard timeoutMs >= 0 else {
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        let deadline = NIODeadline.now() + .milliseconds(Int64(timeoutMs))
        if let due = timerDeadline, due <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = loop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            guard !stopped else { return }
            act(on: hp_socket_timeout(), mask: 0)
            collectFinished()
        }
    }

    private func runCurl(_ body: () -> Void) {
        insideCurl = true
        defer { insideCurl = false }
        body()
    }

    // MARK: - finishing

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var privatePointer: UnsafeMutableRawPointer? = nil
            _ = hp_getinfo_ptr(handle, CURLINFO_PRIVATE, &privatePointer)
            guard let privatePointer else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(privatePointer).takeUnretainedValue()
            // No new connection and no pretransfer time: it never had one (a reused connection sets the time).
            statistics.count(newConnections: transfer.easy?.info(CURLINFO_NUM_CONNECTS) ?? 0,
                             connected: (transfer.easy?.info(offset: CURLINFO_PRETRANSFER_TIME_T) ?? 0) > 0)
            if code == CURLE_OK, let delegate = transfer.connectionDelegate {
                handOver(transfer, to: delegate)
                continue
            }
            remove(transfer, outcome: transfer.outcome(for: code))
        }
    }

    /// Takes the transfer out of the multi handle; reports `outcome` unless it was cancelled.
    private func remove(_ transfer: CurlTransfer, outcome: UpstreamOutcome?) {
        guard active.removeValue(forKey: transfer.id) != nil, let easy = transfer.easy else { return }
        leaveConnection(transfer)
        // Only a transfer that completed leaves its connection idle in the cache (a cancelled one's is closed), and
        // only while no other transfer has taken that connection since (curl may hand it on in the same call).
        let port = transfer.connectionPort
        let stillHeld = releasePort(of: transfer)
        let kept = outcome.map { $0.error == nil } == true && stillHeld ? keptHTTP1Socket(easy) : nil
        // A cancelled HTTP/2 transfer's RST_STREAM waits in libcurl 7.88 for the connection's next frame, which an
        // idle connection never sends: the origin would go on working for nobody. So a cancelled transfer's
        // connection is closed, when no other transfer uses it (curl keeps a connection others use; a cancelled
        // HTTP/1 transfer's is closed anyway).
        if outcome == nil { try? easy.set(CURLOPT_FORBID_REUSE, true) }
        runCurl { _ = curl_multi_remove_handle(multi, easy.handle) }
        if let kept { watchIdle(kept, port: port) }
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

    // MARK: - pausing an HTTP/2 transfer

    /// Whether `transfer`, an HTTP/2 one whose client reads slowly, may be paused. libcurl 7.88 pauses an HTTP/2
    /// transfer coarsely (its connection's other streams may wait with it), so only one alone on its connection may.
    /// If another transfer takes that connection later (`connectionTaken`), the permission ends: the transfer is
    /// resumed and its delegate hears `connectionShared`. Loop (inside curl's body callback).
    func mayPauseAlone(_ transfer: CurlTransfer) -> Bool {
        if transfer.pausesAlone { return true }
        let port = transfer.connectionPort
        guard port != 0, portUsers[port] == 1 else { return false }
        transfer.pausesAlone = true
        lonePausers[port] = transfer
        return true
    }

    /// `transfer` took the connection on `port`: it counts there (no longer on the one it held before), and a
    /// transfer that was alone on it may pause no more.
    private func takeConnection(port: Int, by transfer: CurlTransfer) {
        if transfer.connectionPort != 0 { leaveConnection(transfer) }
        guard port != 0 else { return }
        portUsers[port, default: 0] += 1
        guard let lone = lonePausers[port], lone !== transfer else { return }
        lonePausers.removeValue(forKey: port)
        lone.pausesAlone = false
        lone.delegate.connectionShared()
        let id = lone.id
        loop.execute { self.resume(id) }  // (not inside curl)
    }

    private func leaveConnection(_ transfer: CurlTransfer) {
        let port = transfer.connectionPort
        guard port != 0, let users = portUsers[port] else { return }
        if users <= 1 { portUsers.removeValue(forKey: port) } else { portUsers[port] = users - 1 }
        if lonePausers[port] === transfer { lonePausers.removeValue(forKey: port) }
    }

    // MARK: - idle connections

    /// The socket of the HTTP/1 connection a finished transfer left in curl's cache, if it kept one. (An HTTP/2
    /// connection is not idle between streams: the server's PING and SETTINGS frames are its own.)
    private func keptHTTP1Socket(_ easy: CurlEasy) -> Int32? {
        let version = easy.info(CURLINFO_HTTP_VERSION)
        guard version == hp_http_version_1_1() || version == hp_http_version_1_0() else { return nil }
        var socket: curl_socket_t = -1
        guard hp_getinfo_socket(easy.handle, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else { return nil }
        return socket
    }

    /// Every socket a transfer's connection opens is closed through `curlCloses` (curl keeps the callback with the
    /// connection, for its later closes too), and the connection curl gives the transfer, new or cached, is named
    /// to `connectionTaken` before the request goes out on it.
    private func watchConnections(_ easy: CurlEasy, for transfer: CurlTransfer) throws(CurlError) {
        try easy.set(CURLOPT_CLOSESOCKETDATA, pointer: Unmanaged.passUnretained(self).toOpaque())
        try curlCheck(hp_setopt_closesocket_callback(easy.handle) { context, socket in
            Unmanaged<LoopEngine>.fromOpaque(context!).takeUnretainedValue().curlCloses(socket)
        }, "curl_easy_setopt(CURLOPT_CLOSESOCKETFUNCTION)")
        transfer.engine = self
        transfer.connectionPort = 0
        try easy.set(CURLOPT_PREREQDATA, pointer: Unmanaged.passUnretained(transfer).toOpaque())
        try curlCheck(hp_setopt_prereq_callback(easy.handle) { context, _, _, _, localPort in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            transfer.engine?.connectionTaken(port: Int(localPort), by: transfer)
            return hp_prereqfunc_ok()
        }, "curl_easy_setopt(CURLOPT_PREREQFUNCTION)")
    }

    /// CURLOPT_PREREQFUNCTION: curl gave `transfer` the connection whose local port is `port`, and is about to send
    /// on it. A cached connection leaves the idle watch here, not only when curl asks to watch its socket: a
    /// transfer whose response is there at once can be paused (its client is slow) before curl asks for anything,
    /// and its bytes must never look like bytes no request asked for.
    fileprivate func connectionTaken(port: Int, by transfer: CurlTransfer) {
        takeConnection(port: port, by: transfer)
        transfer.connectionPort = port
        transfer.idleClock.connected = true
        portHolders[port] = transfer.id
        if let socket = idlePorts[port] { _ = unwatchIdle(socket) }
    }

    /// Ends `transfer`'s hold on its connection's port; whether it still held it (no transfer took the connection
    /// since).
    private func releasePort(of transfer: CurlTransfer) -> Bool {
        let port = transfer.connectionPort
        guard port != 0, portHolders[port] == transfer.id else { return false }
        portHolders.removeValue(forKey: port)
        return true
    }

    /// CURLOPT_CLOSESOCKETFUNCTION: the socket leaves the idle watch before it is closed, since its number may be
    /// another socket's (another thread's) right after: the guard must never peek at or shut that one.
    private func curlCloses(_ socket: Int32) -> Int32 {
        _ = unwatchIdle(socket)
        socketSet.closing(socket)
        return close(socket)
    }

    /// Idle connections watched now (tests: each must be a socket curl still holds).
    var idleWatched: Set<Int32> { Set(idleSockets.keys) }

    /// Watches an idle cached connection for readability until curl takes it back (`curlWatches`) or closes it.
    private func watchIdle(_ socket: Int32, port: Int) {
        guard !stopped, sockets[socket] == nil, handedOver[socket] == nil else { return }  // still in use
        if let other = idlePorts[port] { _ = unwatchIdle(other) }  // (the same local port towards another server)
        idleSockets[socket] = port
        idlePorts[port] = socket
        socketSet.watch(socket, events: LoopEngine.idleEvents)
    }

    /// Takes `socket` out of the idle watch (its epoll registration stays: one-shot, re-armed or deleted by the
    /// caller); whether it was there.
    private func unwatchIdle(_ socket: Int32) -> Bool {
        guard let port = idleSockets.removeValue(forKey: socket) else { return false }
        idlePorts.removeValue(forKey: port)
        return true
    }

    /// An idle HTTP/1 connection became readable. A close is curl's to find. Bytes are a response no request asked
    /// for (a body after a 204, 304 or HEAD answer, or garbage after a complete one): curl 7.88 takes a connection
    /// with bytes waiting as alive and would read them as the next request's response, which may be another
    /// client's. Shutting the socket makes curl find it closed and open another.
    private func idleConnectionSpoke(_ socket: Int32) {
        guard let port = idleSockets[socket] else { return }
        _ = unwatchIdle(socket)
        var byte: UInt8 = 0
        let peeked = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if peeked > 0 {
            _ = shutdown(socket, Int32(SHUT_RDWR))
        } else if peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            idleSockets[socket] = port
            idlePorts[port] = socket
            socketSet.watch(socket, events: LoopEngine.idleEvents)
        }
    }

    // MARK: - connections handed over (connect-only transfers)

    /// curl connected a connect-only transfer: its handle stays in the multi handle (curl_easy_send and
    /// curl_easy_recv need that in 7.88) while an `UpstreamConnection` carries the bytes.
    private func handOver(_ transfer: CurlTransfer, to delegate: any UpstreamConnectionDelegate) {
        guard active.removeValue(forKey: transfer.id) != nil, let easy = transfer.easy else { return }
        leaveConnection(transfer)
        let outcome = transfer.outcome(for: CURLE_OK)
        transfer.easy = nil
        transfer.state = .finished
        transfer.connectionDelegate = nil
        _ = releasePort(of: transfer)
        var socket: curl_socket_t = -1
        guard hp_getinfo_socket(easy.handle, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else {
            runCurl { _ = curl_multi_remove_handle(multi, easy.handle) }
            var failed = outcome
            failed.error = ProxyError(.upstreamFailed, "hookproxy: upstream error \(transfer.host): curl kept no connection")
            delegate.upstreamConnectFailed(failed)
            return
        }
        // curl no longer watches it (the transfer is done); if it still did, the connection's readiness wins.
        let connection = UpstreamConnection(engine: self, easy: easy, owner: transfer, socket: socket, delegate: delegate)
        handedOver[socket] = connection
        guard !transfer.hasTLS else { return startRelay(connection, delegate: delegate, outcome: outcome) }
        UpstreamChannelHandler.open(socket, on: loop, for: connection) { [self] handler in
            // Stopped, or already released (shutdown) while the channel was set up: nothing to start.
            guard !stopped, handedOver[socket] === connection else {
                handler?.close()
                return
            }
            if let handler { connection.carry(on: handler) }  // else curl carries it (no descriptor to spare)
            startRelay(connection, delegate: delegate, outcome: outcome)
        }
    }

    private func startRelay(_ connection: UpstreamConnection, delegate: any UpstreamConnectionDelegate, outcome: UpstreamOutcome) {
        delegate.upstreamConnected(connection, outcome)
        if connection.isOpen { connection.startReading() }
    }

    /// Watches a handed-over connection's socket once for `events`.
    func watch(_ connection: UpstreamConnection, events: UInt32) {
        guard !stopped, handedOver[connection.socket] === connection else { return }
        socketSet.watch(connection.socket, events: events)
    }

    /// A handed-over connection is done: curl closes it as its handle leaves the multi handle (curl ≥ 7.85).
    func release(_ connection: UpstreamConnection, easy: CurlEasy) {
        if handedOver[connection.socket] === connection {
            handedOver.removeValue(forKey: connection.socket)
            socketSet.forget(connection.socket)
        }
        if !multiFreed { runCurl { _ = curl_multi_remove_handle(multi, easy.handle) } }
    }

    private func recycle(_ easy: CurlEasy) {
        easy.reset()
        if !easy.retired && idleHandles.count < LoopEngine.maxIdleHandles { idleHandles.append(easy) }
    }
}
