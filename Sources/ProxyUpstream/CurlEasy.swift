internal import CCurl
import Glibc

/// A typed wrapper of one curl easy handle. Owned by one event loop's `LoopEngine`; never touched elsewhere.
/// Reused across transfers (`reset`), so connection and DNS caches of the multi handle carry over.
final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    /// Header list currently installed; freed on reset.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    /// Strings libcurl was given that must outlive the transfer (curl copies most, not all).
    private var keptStrings: [UnsafeMutablePointer<CChar>] = []
    /// The handle carried a chunked upload with a trailer callback: libcurl 7.88 leaves its trailer state at "done"
    /// through `curl_easy_reset`, and the next chunked upload on it would write its chunk prefix before its upload
    /// buffer (heap corruption). Such a handle is never reused.
    private(set) var retired = false

    init() {
        guard let handle = curl_easy_init() else { fatalError("curl_easy_init returned NULL: out of memory") }
        self.handle = handle
    }

    deinit {
        freeOwned()
        curl_easy_cleanup(handle)
    }

    /// Forgets every option so the handle can carry the next transfer.
    func reset() {
        curl_easy_reset(handle)
        freeOwned()
    }

    private func freeOwned() {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        if let connectToList { curl_slist_free_all(connectToList) }
        connectToList = nil
        for string in keptStrings { free(string) }
        keptStrings.removeAll(keepingCapacity: true)
    }

    func set(_ option: CURLoption, _ value: Int) throws(CurlError) {
        try curlCheck(hp_setopt_long(handle, option, value), "curl_easy_setopt(\(option.rawValue))")
    }

    func set(_ option: CURLoption, _ value: Bool) throws(CurlError) {
        try set(option, value ? 1 : 0)
    }

    func set(_ option: CURLoption, offset value: Int64) throws(CurlError) {
        try curlCheck(hp_setopt_off(handle, option, curl_off_t(value)), "curl_easy_setopt(\(option.rawValue))")
    }

    /// libcurl copies string options, so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String) throws(CurlError) {
        try curlCheck(hp_setopt_str(handle, option, value), "curl_easy_setopt(\(option.rawValue))")
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws(CurlError) {
        try curlCheck(hp_setopt_ptr(handle, option, value), "curl_easy_setopt(\(option.rawValue))")
    }

    func set(_ option: CURLoption, callback: hp_data_callback) throws(CurlError) {
        try curlCheck(hp_setopt_data_callback(handle, option, callback), "curl_easy_setopt(\(option.rawValue))")
    }

    func setSSLContextCallback(_ callback: hp_ssl_ctx_callback) throws(CurlError) {
        try curlCheck(hp_setopt_ssl_ctx_callback(handle, callback), "curl_easy_setopt(SSL_CTX_FUNCTION)")
    }

    func setTrailerCallback(_ callback: hp_trailer_callback) throws(CurlError) {
        retired = true
        try curlCheck(hp_setopt_trailer_callback(handle, callback), "curl_easy_setopt(TRAILERFUNCTION)")
    }

    func setProgressCallback(_ callback: hp_xferinfo_callback) throws(CurlError) {
        try curlCheck(hp_setopt_xferinfo_callback(handle, callback), "curl_easy_setopt(XFERINFOFUNCTION)")
    }

    func setSeekCallback(_ callback: hp_seek_callback) throws(CurlError) {
        try curlCheck(hp_setopt_seek_callback(handle, callback), "curl_easy_setopt(SEEKFUNCTION)")
    }

    /// Installs `lines` (`Name: value`) as CURLOPT_HTTPHEADER; the list lives until the next reset.
    func setHeaders(_ lines: [String]) throws(CurlError) {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for line in lines {
            guard let appended = curl_slist_append(list, line) else { break }
            list = appended
        }
        if let headerList { curl_slist_free_all(headerList) }
        headerList = list
        try curlCheck(hp_setopt_slist(handle, CURLOPT_HTTPHEADER, list), "curl_easy_setopt(HTTPHEADER)")
    }

    /// CURLOPT_CONNECT_TO: `HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT` entries.
    func setConnectTo(_ entries: [String]) throws(CurlError) {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for entry in entries { list = curl_slist_append(list, entry) }
        connectToList.map { curl_slist_free_all($0) }
        connectToList = list
        try curlCheck(hp_setopt_slist(handle, CURLOPT_CONNECT_TO, list), "curl_easy_setopt(CONNECT_TO)")
    }

    func info(_ info: CURLINFO) -> Int? {
        var value = 0
        return hp_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }

    func info(offset info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return hp_getinfo_off(handle, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    func info(string info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>? = nil
        guard hp_getinfo_str(handle, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    /// The address of the connection's OpenSSL `SSL *` (CURLINFO_TLS_SSL_PTR); nil without TLS.
    var tlsConnection: UInt? {
        hp_tls_ssl_pointer(handle).map { UInt(bitPattern: $0) }
    }

    func pause(_ bitmask: Int32) -> CURLcode {
        curl_easy_pause(handle, bitmask)
    }
}

@available(*, unavailable)
extension CurlEasy: Sendable {}
