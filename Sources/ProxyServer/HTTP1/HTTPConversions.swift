import NIOHTTP1
import ProxyModel

// Conversions between NIO's HTTP types and hookproxy's model, kept in one place.

extension HeaderFields {
    init(_ headers: HTTPHeaders) {
        var fields: [HeaderField] = []
        fields.reserveCapacity(headers.count)
        for (name, value) in headers { fields.append(HeaderField(name: name, value: value)) }
        self.init(fields)
    }

    var nioHeaders: HTTPHeaders {
        HTTPHeaders(fields.map { ($0.name, $0.value) })
    }
}

extension HTTPVersionNumber {
    init(_ version: HTTPVersion) { self.init(major: Int(version.major), minor: Int(version.minor)) }
    var nio: HTTPVersion { HTTPVersion(major: major, minor: minor) }
}

extension ResponseHead {
    func nioHead(version: HTTPVersion) -> HTTPResponseHead {
        HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: max(0, status), reasonPhrase: reason),
                         headers: headers.nioHeaders)
    }
}
