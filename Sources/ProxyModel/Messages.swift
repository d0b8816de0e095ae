/// An HTTP version as `major.minor`.
public struct HTTPVersionNumber: Sendable, Hashable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public init(major: Int, minor: Int) { self.major = major; self.minor = minor }
    public static let http1_0 = HTTPVersionNumber(major: 1, minor: 0)
    public static let http1_1 = HTTPVersionNumber(major: 1, minor: 1)
    public static let http2 = HTTPVersionNumber(major: 2, minor: 0)
    /// `HTTP/1.1`; HTTP/2 and later by their major number alone (`HTTP/2`), as RFC 9113 names it.
    public var description: String {
        switch (major, minor) {
        case (1, 1): "HTTP/1.1"  // the usual ones without interpolating (every log record names two)
        case (1, 0): "HTTP/1.0"
        case (2, 0): "HTTP/2"
        default: major >= 2 && minor == 0 ? "HTTP/\(major)" : "HTTP/\(major).\(minor)"
        }
    }
}

/// A request head as hookproxy forwards it: method, absolute URL, version and headers (hop-by-hop removed).
public struct RequestHead: Sendable, Hashable {
    public var method: String
    public var url: ProxyURL
    public var version: HTTPVersionNumber
    public var headers: HeaderFields

    public init(method: String, url: ProxyURL, version: HTTPVersionNumber = .http1_1, headers: HeaderFields = []) {
        self.method = method
        self.url = url
        self.version = version
        self.headers = headers
    }
}

/// A response head: status, reason phrase as the server sent it, version and headers.
public struct ResponseHead: Sendable, Hashable {
    public var status: Int
    public var reason: String
    public var version: HTTPVersionNumber
    public var headers: HeaderFields

    public init(status: Int, reason: String? = nil, version: HTTPVersionNumber = .http1_1, headers: HeaderFields = []) {
        self.status = status
        self.reason = reason ?? ResponseHead.standardReason(for: status)
        self.version = version
        self.headers = headers
    }

    /// Whether a response with this status to a request with this method carries a body.
    public static func hasBody(status: Int, requestMethod: String) -> Bool {
        if requestMethod == "HEAD" { return false }
        if (100..<200).contains(status) || status == 204 || status == 304 { return false }
        if requestMethod == "CONNECT" && (200..<300).contains(status) { return false }
        return true
    }

    public static func standardReason(for status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 102: "Processing"
        case 103: "Early Hints"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 508: "Loop Detected"
        default: ""
        }
    }
}
