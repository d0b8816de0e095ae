import Foundation
import ProxyModel
import Testing

struct HexTextTests {
    @Test("colonSeparated is %02X joined by colons")
    func sameAsFormat() {
        let bytes = (0...255).map(UInt8.init) + [0, 10, 255]
        #expect(HexText.colonSeparated(bytes) == bytes.map { String(format: "%02X", $0) }.joined(separator: ":"))
        #expect(HexText.colonSeparated([UInt8]()) == "")
    }
}
