/// Phase timings of one upstream exchange in milliseconds, as libcurl measured them (nil when not measured).
/// `dns`, `connect`, `tls` are the durations of those phases; `firstByte` and `total` are from the transfer start.
public struct Timings: Sendable, Hashable, Codable {
    public var dns: Double?
    public var connect: Double?
    public var tls: Double?
    public var firstByte: Double?
    public var total: Double?

    public init(dns: Double? = nil, connect: Double? = nil, tls: Double? = nil, firstByte: Double? = nil, total: Double? = nil) {
        self.dns = dns
        self.connect = connect
        self.tls = tls
        self.firstByte = firstByte
        self.total = total
    }

    enum CodingKeys: String, CodingKey {
        case dns, connect, tls
        case firstByte = "first_byte"
        case total
    }
}
