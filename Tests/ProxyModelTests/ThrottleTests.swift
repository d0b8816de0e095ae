import ProxyModel
import Testing

/// `Throttle`: presets, the `--throttle` SPEC form, merging, and the log words.
@Suite struct ThrottleTests {
    @Test("presets carry the devtools values", arguments: [
        ("3g", Throttle(downKbps: 1440, upKbps: 675, latencyMs: 563)),
        ("slow-3g", Throttle(downKbps: 400, upKbps: 400, latencyMs: 2000)),
        ("edge", Throttle(downKbps: 240, upKbps: 200, latencyMs: 400)),
        ("SLOW-3G", Throttle(downKbps: 400, upKbps: 400, latencyMs: 2000)),
    ])
    func presets(name: String, expected: Throttle) throws {
        #expect(try Throttle(parsing: name) == expected)
    }

    @Test("the SPEC form takes any subset of down, up, latency, in any order")
    func spec() throws {
        #expect(try Throttle(parsing: "down=1000,up=500,latency=100") == Throttle(downKbps: 1000, upKbps: 500, latencyMs: 100))
        #expect(try Throttle(parsing: "latency=250") == Throttle(latencyMs: 250))
        #expect(try Throttle(parsing: " up = 8, down=0 ") == Throttle(downKbps: 0, upKbps: 8))
    }

    @Test("anything else is refused with the problem and the forms to write", arguments: [
        ("bogus", "unknown preset"),
        ("", "unknown preset"),
        ("down=fast", "down must be a whole number from 0 to 10000000, found 'fast'"),
        ("down=-5", "down must be a whole number from 0 to 10000000, found '-5'"),
        ("latency=600001", "latency must be a whole number from 0 to 600000"),
        ("speed=1", "unknown key 'speed'; the keys are down, up, latency"),
        ("down=1,down=2", "down given twice"),
        ("down=1,", "'' has no '='"),
    ])
    func refused(text: String, problem: String) {
        do {
            _ = try Throttle(parsing: text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.description.contains(problem), "\(error)")
            #expect(error.description.contains("3g, slow-3g, edge"), "\(error)")
        }
    }

    @Test("kbps are kilobits: 1 kbps = 125 bytes/s; 0 is unlimited")
    func units() {
        #expect(Throttle(downKbps: 8000).downBytesPerSecond == 1_000_000)
        #expect(Throttle(downKbps: 0).downBytesPerSecond == nil)
        #expect(Throttle(latencyMs: 5).upBytesPerSecond == nil)
        #expect(!Throttle(downKbps: 0, upKbps: 0, latencyMs: 0).isActive)
    }

    @Test("filling: per field, the throttle's own value wins over the other's")
    func filling() {
        let rule = Throttle(downKbps: 0, latencyMs: 10)
        let flag = Throttle(downKbps: 400, upKbps: 400, latencyMs: 2000)
        #expect(rule.filling(from: flag) == Throttle(downKbps: 0, upKbps: 400, latencyMs: 10))
        #expect(rule.filling(from: nil) == rule)
    }

    @Test("the log words name the limits in force")
    func words() {
        #expect(Throttle(downKbps: 1000, upKbps: 500, latencyMs: 100).description
                == "throttled down 1000 kbps up 500 kbps latency 100 ms")
        #expect(Throttle(downKbps: 0, upKbps: 64).description == "throttled up 64 kbps")
    }
}
