import Testing
@testable import ProxyLog

/// `BodyText.kind(of:)` reads the media type off the bytes; it must classify as the split-trim-lowercase reading did.
struct BodyTextKindTests {
    static func reference(_ contentType: String?) -> BodyText.Kind {
        guard let contentType else { return .unknown }
        let media = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return BodyText.kind(of: String(media).trimmingSpaces().lowercased() + "; x=y")
    }

    @Test(arguments: [
        "application/octet-stream", "Application/Octet-Stream", "text/html; charset=utf-8", " TEXT/PLAIN ;q=1",
        "application/problem+json", "image/SVG+XML", "image/png", "IMAGE/PNG", "font/woff2", "application/grpc",
        "", ";", " ; ", "application/json;", "application/vnd.api+JSON", "video/mp4", "weird", "application/x-yaml",
    ])
    func classifiesAsBefore(_ contentType: String) {
        #expect(BodyText.kind(of: contentType) == Self.reference(contentType), "\(contentType)")
    }

    @Test func mediaTypeIsLowercasedAndTrimmed() {
        #expect(BodyText.mediaType(" Text/HTML ; charset=UTF-8") == "text/html")
        #expect(BodyText.mediaType("application/json") == "application/json")
        #expect(BodyText.mediaType(";") == "")
        // Each byte that takes the value off the copy-free path on its own: a capital, a space or tab at either end.
        #expect(BodyText.mediaType("Text/html") == "text/html")
        #expect(BodyText.mediaType("\ttext/html") == "text/html")
        #expect(BodyText.mediaType("text/html ") == "text/html")
        // Parameters start at the ';' byte, whatever follows it (a combining mark made it no separator for the
        // Character-based split this replaced).
        #expect(BodyText.mediaType("application/octet-stream;\u{301}") == "application/octet-stream")
        #expect(BodyText.kind(of: "application/octet-stream;\u{301}") == .binary)
    }
}
