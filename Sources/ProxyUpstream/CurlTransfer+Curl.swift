internal import CCurl
import Glibc
import ProxyModel

// How one transfer is set up on its easy handle, the C callbacks that feed it, and how its end is read back.
// Everything here runs on the transfer's event loop (its `LoopEngine`).
extension CurlTransfer {
    static let bufferSize = 64 * 1024

    func configure(_ easy: CurlEasy, settings: UpstreamSettings) throws(CurlError) {
        let head = request.head
        let context = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_PRIVATE, pointer: context)
        try easy.set(CURLOPT_NOSIGNAL, true)
        // The whole URL when curl must know the real path: through an HTTP upstream proxy a plain-HTTP request goes
        // in absolute form, and curl's Digest answer signs the URL's path. Otherwise the target is passed verbatim
        // (CURLOPT_REQUEST_TARGET), so curl's URL parser never rewrites what the client sent.
        let viaProxy = !(settings.upstreamProxy ?? "").isEmpty && head.url.scheme == "http" && !request.connectOnly
        let answersChallenges = request.challenge?.action == .useCredential
        // `OPTIONS *` goes as `*` either way (to an upstream proxy too, as curl's own `--request-target '*'` does).
        if (viaProxy || answersChallenges) && !head.url.isAsterisk {
            try easy.set(CURLOPT_URL, head.url.description)
        } else {
            try easy.set(CURLOPT_URL, "\(head.url.scheme)://\(head.url.authority)/")
            try easy.set(CURLOPT_REQUEST_TARGET, head.url.pathAndQuery)
        }
        try easy.set(CURLOPT_PATH_AS_IS, true)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        // HTTP/2 only where ALPN can pick it (2TLS: https; plain http stays 1.1). PIPEWAIT: a request to an origin
        // whose connection is still being set up waits to learn whether it can share it, instead of opening another.
        // (A connection handed over for an upgrade speaks HTTP/1.1: its ALPN must not offer h2.)
        let http2 = settings.http2 && head.url.scheme == "https" && !request.connectOnly
        try easy.set(CURLOPT_HTTP_VERSION, http2 ? hp_http_version_2tls() : hp_http_version_1_1())
        try easy.set(CURLOPT_PIPEWAIT, http2)
        // Never read proxies from the environment: HTTP_PROXY often points at hookproxy itself.
        try easy.set(CURLOPT_PROXY, settings.upstreamProxy ?? "")
        if settings.upstreamProxy != nil { try easy.set(CURLOPT_PROXYAUTH, hp_auth_any()) }
        // The upstream proxy's answers to a CONNECT reach the header callback only to be counted (`proxyConnect`),
        // never the response head (libcurl 7.88 marks them in no way a callback can read: see `isConnectLine`).
        proxyConnect = tunnelsThroughProxy ? ProxyConnectHeads() : nil
        try easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, !tunnelsThroughProxy)
        try easy.set(CURLOPT_HTTP_CONTENT_DECODING, false)
        // libcurl 7.88 refuses a new receive-buffer size once a recycled handle has its buffer: keep the old one.
        try? easy.set(CURLOPT_BUFFERSIZE, CurlTransfer.bufferSize)
        try easy.set(CURLOPT_UPLOAD_BUFFERSIZE, CurlTransfer.bufferSize)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs)
        // The idle timeout is `UpstreamIdleClock`'s, checked in the progress callback. A low-speed limit stays set
        // because curl then wakes the transfer once a second (its speed check), which is what calls that callback
        // while the upstream is silent; its own time is a day, a backstop only: at the idle timeout it cut an
        // upstream that trickled a byte every few seconds (under 1 byte/s on average), however recent its last byte.
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, 1)
        try easy.set(CURLOPT_LOW_SPEED_TIME, max(86_400, (settings.idleTimeoutMs + 999) / 1000))
        errorBuffer[0] = 0
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))

        try easy.set(CURLOPT_HEADERFUNCTION, callback: { buffer, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.onHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
        })
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
        try easy.set(CURLOPT_WRITEFUNCTION, callback: { buffer, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.onBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
        })
        try easy.set(CURLOPT_WRITEDATA, pointer: context)

        if request.connectOnly {
            // curl connects (and tunnels through an upstream proxy, whatever the scheme: the bytes that follow are
            // not HTTP curl could forward) and stops; `UpstreamConnection` carries the rest.
            try easy.set(CURLOPT_CONNECT_ONLY, 1)
            // A connection of its own: a pooled one (maybe multiplexing others' streams) is never handed over.
            try easy.set(CURLOPT_FRESH_CONNECT, true)
            if !(settings.upstreamProxy ?? "").isEmpty { try easy.set(CURLOPT_HTTPPROXYTUNNEL, true) }
            try configureTLS(easy)
            try configureClientCertificate(easy)
            return
        }
        try configureMethodAndBody(easy, context: context)
        try configureProgress(easy, context: context)
        try easy.setHeaders(headerLines())
        try configureTLS(easy)
        try configureChallenge(easy)
    }

    private func configureMethodAndBody(_ easy: CurlEasy, context: UnsafeMutableRawPointer) throws(CurlError) {
        let method = request.head.method
        switch request.body {
        case .none:
            if method == "HEAD" {
                try easy.set(CURLOPT_NOBODY, true)
            } else if method == "GET" {
                try easy.set(CURLOPT_HTTPGET, true)
            } else {
                try easy.set(CURLOPT_CUSTOMREQUEST, method)
            }
        case .length, .chunked:
            try easy.set(CURLOPT_UPLOAD, true)
            if case .length(let length) = request.body {
                try easy.set(CURLOPT_INFILESIZE_LARGE, offset: length)
            }
            if method != "PUT" { try easy.set(CURLOPT_CUSTOMREQUEST, method) }
            try easy.set(CURLOPT_READFUNCTION, callback: { buffer, size, count, context in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
                return transfer.onReadBody(UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
            })
            try easy.set(CURLOPT_READDATA, pointer: context)
            try easy.setSeekCallback({ context, offset, origin in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
                // A request with trailers is never sent twice (libcurl 7.88 corrupts its upload buffer on a second
                // round after trailers): the retry fails instead.
                guard offset == 0, origin == SEEK_SET, transfer.easy?.retired != true, transfer.delegate.rewindRequestBody() else {
                    return hp_seekfunc_cantseek()
                }
                return hp_seekfunc_ok()
            })
            try easy.set(CURLOPT_SEEKDATA, pointer: context)
            // Only for a request that announces trailers (`Trailer`), and never one libcurl would send twice (an
            // answered challenge, an upstream proxy's 407): libcurl 7.88 keeps its trailer state through a second
            // round and writes the next chunk's prefix before its upload buffer (heap corruption, a crash).
            // (See also `CurlEasy.retired`.)
            if case .chunked = request.body, request.head.headers.contains("trailer"), !mayAnswerChallenges {
                try easy.setTrailerCallback({ list, context in
                    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
                    for field in transfer.delegate.requestTrailers() ?? [] {
                        list?.pointee = curl_slist_append(list?.pointee, "\(field.name): \(field.value)")
                    }
                    return hp_trailerfunc_ok()
                })
                try easy.set(CURLOPT_TRAILERDATA, pointer: context)
            }
        }
    }

    /// The request headers as curl header lines, in the client's order. Content-Length is curl's to write
    /// (from the body framing); curl's own defaults (Accept, Expect) are suppressed when the client sent none.
    private func headerLines() -> [String] {
        var lines: [String] = []
        lines.reserveCapacity(request.head.headers.count + 2)
        for field in request.head.headers where !field.name.caseInsensitiveEquals("content-length") {
            lines.append(field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
        }
        if !request.head.headers.contains("accept") { lines.append("Accept:") }
        if !request.head.headers.contains("expect") { lines.append("Expect:") }
        return lines
    }

    // MARK: callbacks

    func onHeaderLine(_ line: UnsafeRawBufferPointer) -> Int {
        idleClock.moved()
        if proxyConnect != nil, let easy,
           proxyConnect!.isConnectLine(pretransferMicros: easy.info(offset: CURLINFO_PRETRANSFER_TIME_T) ?? 0,
                                       connects: easy.info(CURLINFO_NUM_CONNECTS) ?? 0) {
            guard proxyConnect!.feed(line) else {
                recordedError = UpstreamProxyFailure.challengeFailed(proxyConnect!, settings: request.settings, target: proxyTarget)
                return 0  // not the byte count: curl ends the transfer with CURLE_WRITE_ERROR
            }
            return line.count
        }
        guard headParser.feed(line) else {
            if line.count <= 2, let informational = headParser.takeInformational() {
                delegate.didReceiveInformational(informational)
            }
            return line.count
        }
        let status = headParser.current?.status ?? 0
        if holdsHeadForAuthRound(status) {
            // libcurl answers a Digest challenge marked `stale=true` again and again: a server that says so every
            // time would get thousands of requests in a second (until curl's 300 KiB cap on all heads ends it with
            // "Too large response headers"). After `maxAuthRounds` answers, hookproxy stops and says why.
            guard headParser.answeredChallenges < CurlTransfer.maxAuthRounds else {
                let field = status == 407 ? "Proxy-Authenticate" : "WWW-Authenticate"
                let offered = headParser.current?.headers[field].map { String($0.prefix(200)) } ?? "no scheme offered"
                let asked = "asked for credentials again after \(headParser.answeredChallenges) answers (\(status) \(offered))"
                headParser.withhold()
                recordedError = status == 407 && request.settings.upstreamProxyName != nil
                    ? ProxyError(.upstreamFailed, "hookproxy: challenge failed upstream proxy \(request.settings.upstreamProxyName!) (for \(host)): it \(asked)")
                    : ProxyError(.upstreamFailed, "hookproxy: challenge failed \(host): the server \(asked)")
                return 0  // not the byte count: curl ends the transfer with CURLE_WRITE_ERROR
            }
        } else if let head = headParser.takeForDelivery() {
            deliver(head)
        }
        return line.count
    }

    private func deliver(_ head: ResponseHead) {
        if head.version.major == 1, request.head.url.scheme == "https", !head.headers.contains("content-length"),
           !head.headers.contains("transfer-encoding"),
           ResponseHead.hasBody(status: head.status, requestMethod: request.head.method),
           let connection = easy?.tlsConnection {
            // Its body ends with the connection: only close_notify says the close was the server's.
            closeDelimitedOverTLS = connection
            CloseNotifyLedger.expect(connection)
        }
        delegate.didReceiveHead(head)
    }

    /// How many 401/407 answers one transfer gives before it stops: NTLM needs two, a stale Digest nonce one more.
    static let maxAuthRounds = 4

    /// A 401/407 may be answered by curl itself (a second auth round follows): the head waits for the body.
    private func holdsHeadForAuthRound(_ status: Int) -> Bool {
        guard status == 401 || status == 407 else { return false }
        return request.challenge?.action == .useCredential || (status == 407 && request.settings.upstreamProxy != nil)
    }

    func onBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if let head = headParser.takeForDelivery() { deliver(head) }
        let flow = delegate.didReceiveBody(bytes) { [unowned(unsafe) self] in engine?.mayPauseAlone(self) ?? false }
        switch flow {
        case .bytes:
            idleClock.moved()
            return bytes.count
        case .pause, .end:
            idleClock.moved(pausing: true)
            return hp_writefunc_pause()
        case .abort(let reason):
            recordedError = ProxyError(.upstreamFailed, "hookproxy: \(reason) (\(host))")
            return 0  // not the byte count: curl ends the transfer with CURLE_WRITE_ERROR
        }
    }

    func onReadBody(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        switch delegate.provideRequestBody(into: buffer) {
        case .bytes(let count):
            idleClock.moved()
            return count
        case .end:
            idleClock.moved()
            return 0
        case .pause:
            idleClock.moved(pausing: true)
            return hp_readfunc_pause()
        case .abort(let reason):
            recordedError = ProxyError(.upstreamFailed, "hookproxy: \(reason) (\(host))")
            return hp_readfunc_abort()
        }
    }

    // MARK: the end

    func outcome(for code: CURLcode) -> UpstreamOutcome {
        var outcome = UpstreamOutcome(events: events)
        outcome.trailers = headParser.trailers
        if let easy {
            outcome.timings = timings(easy)
            outcome.serverIP = easy.info(string: CURLINFO_PRIMARY_IP)
            outcome.connectionID = easy.info(CURLINFO_LOCAL_PORT).map(String.init)
            if code == CURLE_OK, let event = reusedVerifiedConnectionEvent(newConnections: easy.info(CURLINFO_NUM_CONNECTS) ?? 1) {
                outcome.events.append(event)
            }
            if headParser.answeredChallenges > 0, request.challenge?.action == .useCredential {
                let scheme = answeredScheme(easy) ?? "any"
                let status = headParser.current?.status ?? 0
                outcome.events.append(status == 401 || status == 407
                    ? HookEvent(hook: .challenge, action: "challenge failed", detail: "the server refused the \(scheme) credential")
                    : HookEvent(hook: .challenge, action: "challenge answered \(scheme)"))
            }
        }
        if code != CURLE_OK { outcome.error = recordedError ?? error(for: code) }
        if let connection = closeDelimitedOverTLS {
            closeDelimitedOverTLS = nil
            if CloseNotifyLedger.take(connection) == false, code == CURLE_OK {
                outcome.error = ProxyError(.upstreamFailed, "hookproxy: bad response from \(host): its TLS connection closed without close_notify, so the body it ended may be cut short (RFC 8446 §6.1)")
            }
        }
        return outcome
    }

    private func timings(_ easy: CurlEasy) -> Timings {
        func ms(_ info: CURLINFO) -> Double? {
            guard let micros = easy.info(offset: info), micros > 0 else { return nil }
            return Double(micros) / 1000
        }
        let dns = ms(CURLINFO_NAMELOOKUP_TIME_T)
        let connect = ms(CURLINFO_CONNECT_TIME_T)
        let tls = ms(CURLINFO_APPCONNECT_TIME_T)
        return Timings(
            dns: dns,
            connect: connect.map { $0 - (dns ?? 0) },
            tls: tls.map { $0 - (connect ?? 0) },
            firstByte: ms(CURLINFO_STARTTRANSFER_TIME_T),
            total: ms(CURLINFO_TOTAL_TIME_T)
        )
    }

    private func error(for code: CURLcode) -> ProxyError {
        let reason = errorBuffer[0] == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorBuffer)
        if let easy, failedAtUpstreamProxy(code, easy) {
            return UpstreamProxyFailure.error(code, reason: reason, connectCode: easy.info(CURLINFO_HTTP_CONNECTCODE) ?? 0,
                                              settings: request.settings, target: proxyTarget)
        }
        if let problem = Self.responseProblem(code, reason: reason, headComplete: headParser.complete) {
            return ProxyError(.upstreamFailed, "hookproxy: bad response from \(host): \(problem) (libcurl: \(reason))")
        }
        let (kind, what): (ProxyError.Kind, String)
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: (kind, what) = (.dnsFailed, "DNS failure")
        case CURLE_COULDNT_CONNECT: (kind, what) = (.connectFailed, "cannot connect to")
        case CURLE_OPERATION_TIMEDOUT:
            let connected = (easy?.info(offset: CURLINFO_CONNECT_TIME_T) ?? 0) > 0
            (kind, what) = (.timeout, connected ? "timeout waiting for" : "connect timeout")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_ISSUER_ERROR:
            (kind, what) = (.tlsFailed, "TLS failure")
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            (kind, what) = (.upstreamClosed, "upstream closed the connection")
        default: (kind, what) = (.upstreamFailed, "upstream error")
        }
        return ProxyError(kind, "hookproxy: \(what) \(host)\(throughUpstreamProxy): \(reason)")
    }

    /// Whether a failure is the upstream proxy's: curl could not reach it, or the request never left it for the
    /// server (curl had not begun the transfer: no pretransfer time) while no tunnel was open (no 2xx to a CONNECT;
    /// a TLS failure inside an open tunnel is the server's).
    private func failedAtUpstreamProxy(_ code: CURLcode, _ easy: CurlEasy) -> Bool {
        guard request.settings.upstreamProxyName != nil else { return false }
        if code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_COULDNT_CONNECT { return true }
        let connectCode = easy.info(CURLINFO_HTTP_CONNECTCODE) ?? 0
        return easy.info(offset: CURLINFO_PRETRANSFER_TIME_T) ?? 0 == 0 && !(200..<300).contains(connectCode)
    }

    /// What was wrong with what the server sent, when libcurl's error is its refusal of it in other words: a header
    /// line over 100 KiB ("Out of memory"), a head over 300 KiB, a bad chunk size or a chunk or trailer line too long
    /// (a receive error, "… in chunked-encoding"). nil for every other error.
    private static func responseProblem(_ code: CURLcode, reason: String, headComplete: Bool) -> String? {
        switch code {
        case CURLE_OUT_OF_MEMORY where !headComplete:
            "a response header line is longer than libcurl takes (100 KiB)"
        case CURLE_RECV_ERROR where reason.hasPrefix("Too large response headers"):
            "its response head is larger than libcurl takes (300 KiB)"
        case CURLE_RECV_ERROR where reason.hasSuffix("in chunked-encoding"):
            "its chunked body is malformed or has a line too long"
        default:
            nil
        }
    }
}
