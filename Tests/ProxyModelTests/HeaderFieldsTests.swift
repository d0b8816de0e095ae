import ProxyModel
import Testing

/// `lineBytes`: what the log queue counts a head as, `Name: value\r\n` per field, in UTF-8 bytes.
struct HeaderFieldsTests {
    @Test func lineBytesCountsEachFieldAsALine() {
        let fields: HeaderFields = [("Host", "example.com"), ("X-Émoji", "😀"), ("Empty", "")]
        let lines = fields.map { "\($0.name): \($0.value)\r\n" }.joined()
        #expect(fields.lineBytes == lines.utf8.count)
        #expect(HeaderFields().lineBytes == 0)
    }
}

/// `asciiLowercased`: capitals A–Z only; other letters and bytes as they are.
struct ASCIILowercasedTests {
    @Test func foldsOnlyASCIICapitals() {
        #expect("API.Example.COM".asciiLowercased() == "api.example.com")
        #expect("already-lower".asciiLowercased() == "already-lower")
        #expect("ÉCOLE.Test".asciiLowercased() == "École.test")
        #expect("[@`{]".asciiLowercased() == "[@`{]")
    }
}
