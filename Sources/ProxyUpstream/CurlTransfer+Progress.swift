internal import CCurl
import ProxyModel

// curl's progress callback: the upstream idle timeout (`UpstreamIdleClock`) and the bound on a held challenge's
// body. Runs on the transfer's event loop, inside curl.
extension CurlTransfer {
    /// curl's progress callback, for two checks: the upstream's silence (`UpstreamIdleClock`, every transfer), and
    /// a 401/407 that libcurl will answer, which is read to its end before the next round (to keep the connection)
    /// while its body never reaches hookproxy: one that never ends would hold the request forever. While such a
    /// head waits, more than `maxHeldChallengeBody` bytes fail the transfer.
    func configureProgress(_ easy: CurlEasy, context: UnsafeMutableRawPointer) throws(CurlError) {
        try easy.set(CURLOPT_NOPROGRESS, false)
        try easy.set(CURLOPT_XFERINFODATA, pointer: context)
        try easy.setProgressCallback({ context, _, downloaded, _, _ in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.onProgress(downloaded: Int64(downloaded))
        })
    }

    static let maxHeldChallengeBody: Int64 = 1 << 20

    func onProgress(downloaded: Int64) -> Int32 {
        if idleClock.expired(limitMs: request.settings.idleTimeoutMs) {
            recordedError = ProxyError(.timeout, "hookproxy: timeout waiting for \(host)\(throughUpstreamProxy): it sent and took nothing for \(request.settings.idleTimeoutMs) ms (--idle-timeout)")
            // A 401/407 held for curl's next round is not the answer: the client gets the 504 (it got the 401 of
            // the round before a silent retry).
            if headParser.holdsAnsweredChallenge { headParser.withhold() }
            return 1  // non-zero: curl ends the transfer with CURLE_ABORTED_BY_CALLBACK
        }
        guard headParser.holdsAnsweredChallenge, downloaded > CurlTransfer.maxHeldChallengeBody else { return 0 }
        let status = headParser.current?.status ?? 0
        headParser.withhold()
        let past = "went on past \(CurlTransfer.maxHeldChallengeBody) bytes before it could be answered"
        recordedError = status == 407 && request.settings.upstreamProxyName != nil
            ? ProxyError(.upstreamFailed, "hookproxy: challenge failed upstream proxy \(request.settings.upstreamProxyName!) (for \(host)): the body of its 407 \(past)")
            : ProxyError(.upstreamFailed, "hookproxy: challenge failed \(host): the body of the \(status) the server sent with its challenge \(past)")
        return 1  // non-zero: curl ends the transfer with CURLE_ABORTED_BY_CALLBACK
    }
}
