internal import CCurl

/// A libcurl call that failed: which call, curl's code and curl's reason.
struct CurlError: Error, CustomStringConvertible {
    let call: String
    let code: Int
    let reason: String

    var description: String { "\(call) failed: \(reason) (\(code))" }
}

/// The one funnel every `CURLcode` goes through: throws a typed error unless it is CURLE_OK.
@inline(__always)
func curlCheck(_ code: CURLcode, _ call: @autoclosure () -> String) throws(CurlError) {
    guard code != CURLE_OK else { return }
    throw CurlError(call: call(), code: Int(code.rawValue), reason: String(cString: curl_easy_strerror(code)))
}

@inline(__always)
func curlCheck(_ code: CURLMcode, _ call: @autoclosure () -> String) throws(CurlError) {
    guard code != CURLM_OK else { return }
    throw CurlError(call: call(), code: Int(code.rawValue), reason: String(cString: curl_multi_strerror(code)))
}
