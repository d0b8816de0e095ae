/// The parts of a HAR 1.2 file that a replay reads, decoded leniently: what HAR requires and a replay needs (an
/// entry's request method and URL, the response status) must be there; everything else may be missing.
/// hookproxy's own fields (`_hookproxy`) say which entries are hops of a redirect that hookproxy followed.
struct HARDocument: Decodable {
    struct Log: Decodable {
        var entries: [Entry]
    }

    struct NameValue: Decodable {
        var name: String
        var value: String
    }

    struct PostData: Decodable {
        var mimeType: String?
        var text: String?
        /// hookproxy writes `_encoding: base64` (HAR 1.2 has no encoding for postData); some tools write `encoding`.
        var encoding: String?
        var hookproxyEncoding: String?
        enum CodingKeys: String, CodingKey { case mimeType, text, encoding, hookproxyEncoding = "_encoding" }
    }

    struct Request: Decodable {
        var method: String
        var url: String
        var headers: [NameValue]?
        var postData: PostData?
        var bodySize: Int?
    }

    struct Content: Decodable {
        var size: Int?
    }

    struct Response: Decodable {
        var status: Int
        var content: Content?
        var bodySize: Int?
    }

    struct Hookproxy: Decodable {
        struct Truncated: Decodable { var request: Bool? }
        var client: String?
        var hop: Int?
        var truncated: Truncated?
    }

    struct Entry: Decodable {
        var request: Request
        var response: Response
        var hookproxy: Hookproxy?
        var resourceType: String?
        enum CodingKeys: String, CodingKey {
            case request, response, hookproxy = "_hookproxy", resourceType = "_resourceType"
        }
    }

    var log: Log
}
