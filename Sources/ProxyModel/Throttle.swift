/// A slow network to imitate for an exchange: bandwidth each way and a latency before the request leaves.
/// A rule's `throttle: {down_kbps, up_kbps, latency_ms}` or the `--throttle` flag; any subset of the fields.
///
/// Units: kbps are kilobits per second, 1 kbps = 1000 bit/s = 125 bytes/s (as browsers' devtools count).
/// `0` kbps means "no limit that way" (so a rule can lift a direction the flag limits); `nil` means "not said
/// here" (the field then comes from elsewhere, see `filling(from:)`).
public struct Throttle: Sendable, Hashable, CustomStringConvertible {
    /// Response bandwidth (upstream → client), kilobits per second; 0 = unlimited.
    public var downKbps: Int?
    /// Request body bandwidth (client → upstream), kilobits per second; 0 = unlimited.
    public var upKbps: Int?
    /// Added before the request goes upstream, once per upstream request (each followed redirect hop too).
    public var latencyMs: Int?

    /// Largest bandwidth accepted: 10 Gbit/s.
    public static let maxKbps = 10_000_000
    /// Largest latency accepted (like `delay_ms`): 10 minutes.
    public static let maxLatencyMs = 600_000

    public init(downKbps: Int? = nil, upKbps: Int? = nil, latencyMs: Int? = nil) {
        self.downKbps = downKbps
        self.upKbps = upKbps
        self.latencyMs = latencyMs
    }

    /// Presets with the values browsers' devtools use (README "Throttling" cites the sources).
    /// - `slow-3g`: Chrome DevTools' "Slow 3G" (named "3G" since Chrome 126): 400 kbps each way, 2000 ms.
    /// - `3g`: Chrome DevTools' "Fast 3G" (named "Slow 4G" since Chrome 126): 1440 kbps down, 675 kbps up,
    ///   563 ms (Chrome's 562.5, rounded).
    /// - `edge`: Apple's Network Link Conditioner "Edge": 240 kbps down, 200 kbps up, 400 ms.
    public static let presets: [(name: String, throttle: Throttle)] = [
        ("3g", Throttle(downKbps: 1440, upKbps: 675, latencyMs: 563)),
        ("slow-3g", Throttle(downKbps: 400, upKbps: 400, latencyMs: 2000)),
        ("edge", Throttle(downKbps: 240, upKbps: 200, latencyMs: 400)),
    ]

    public static func preset(named name: String) -> Throttle? {
        presets.first { $0.name == name.lowercased() }?.throttle
    }

    /// Whether it changes anything: some bandwidth limited, or some latency.
    public var isActive: Bool {
        (downKbps ?? 0) > 0 || (upKbps ?? 0) > 0 || (latencyMs ?? 0) > 0
    }

    /// Whether no field is set at all.
    public var isEmpty: Bool { downKbps == nil && upKbps == nil && latencyMs == nil }

    /// This throttle's fields, and `other`'s where this one says nothing: per field, the first to set it wins.
    public func filling(from other: Throttle?) -> Throttle {
        guard let other else { return self }
        return Throttle(downKbps: downKbps ?? other.downKbps, upKbps: upKbps ?? other.upKbps,
                        latencyMs: latencyMs ?? other.latencyMs)
    }

    /// Bytes per second downstream, or nil when unlimited.
    public var downBytesPerSecond: Int? { Self.bytesPerSecond(downKbps) }
    /// Bytes per second upstream, or nil when unlimited.
    public var upBytesPerSecond: Int? { Self.bytesPerSecond(upKbps) }

    static func bytesPerSecond(_ kbps: Int?) -> Int? {
        guard let kbps, kbps > 0 else { return nil }
        return kbps * 125
    }

    /// The words of the log event, e.g. `throttled down 1000 kbps up 500 kbps latency 100 ms`: the limits in force.
    public var description: String {
        var words = ["throttled"]
        if let downKbps, downKbps > 0 { words.append("down \(downKbps) kbps") }
        if let upKbps, upKbps > 0 { words.append("up \(upKbps) kbps") }
        if let latencyMs, latencyMs > 0 { words.append("latency \(latencyMs) ms") }
        return words.joined(separator: " ")
    }
}

extension Throttle {
    /// Why a `--throttle` value was refused, in words that say what to write instead.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var text: String
        public var problem: String

        public var description: String {
            let names = Throttle.presets.map(\.name).joined(separator: ", ")
            return "'\(text)' is not a throttle (\(problem)); give a preset (\(names)) or down=KBPS,up=KBPS,latency=MS (any of them, e.g. down=1000,up=500,latency=100)"
        }
    }

    /// Reads a preset name (`3g`, `slow-3g`, `edge`, any case) or `down=KBPS,up=KBPS,latency=MS` (any non-empty
    /// subset, in any order, each at most once; whole numbers; kbps 0 = unlimited).
    public init(parsing text: String) throws(ParseError) {
        let trimmed = text.trimmingSpaces()
        if let preset = Throttle.preset(named: trimmed) {
            self = preset
            return
        }
        func fail(_ problem: String) -> ParseError { ParseError(text: text, problem: problem) }
        guard trimmed.contains("=") else { throw fail("unknown preset") }
        var throttle = Throttle()
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = pair[0].trimmingSpaces().lowercased()
            guard pair.count == 2 else { throw fail("'\(part)' has no '='") }
            guard ["down", "up", "latency"].contains(key) else {
                throw fail("unknown key '\(key)'; the keys are down, up, latency")
            }
            let valueText = pair[1].trimmingSpaces()
            let range = key == "latency" ? 0...Throttle.maxLatencyMs : 0...Throttle.maxKbps
            guard let value = Int(valueText), range.contains(value) else {
                throw fail("\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), found '\(valueText)'")
            }
            switch key {
            case "down":
                guard throttle.downKbps == nil else { throw fail("down given twice") }
                throttle.downKbps = value
            case "up":
                guard throttle.upKbps == nil else { throw fail("up given twice") }
                throttle.upKbps = value
            case "latency":
                guard throttle.latencyMs == nil else { throw fail("latency given twice") }
                throttle.latencyMs = value
            default:
                break
            }
        }
        self = throttle
    }
}
