/// `printf`'s `%.Nf` for a Double, digit for digit (the exact binary value rounded half to even, as glibc rounds),
/// without `String(format:)`: `FixedPoint.text(1.25, decimals: 1)` is `1.2`, `(0.15, 1)` is `0.1` (0.1499…).
/// Not-a-number and infinities come out as glibc writes them: `nan`, `-nan`, `inf`, `-inf`.
enum FixedPoint {
    static func text(_ value: Double, decimals: Int) -> String {
        precondition((0...3).contains(decimals))
        let sign = value.sign == .minus ? "-" : ""
        if value.isNaN { return sign + "nan" }
        if value.isInfinite { return sign + "inf" }
        var scale: UInt64 = 1
        for _ in 0..<decimals { scale *= 10 }
        // |value| = significand × 2^power, exactly
        let subnormal = value.exponentBitPattern == 0
        let significand = value.significandBitPattern | (subnormal ? 0 : 1 << 52)
        let power = subnormal ? -1074 : Int(value.exponentBitPattern) - 1075
        // |value| × 10^decimals rounded half to even, as decimal digits (the most significant first)
        var digits: [UInt8]
        if power >= 0 {
            digits = decimalDigits(significand, timesPowerOfTwo: power, times: scale)
        } else {
            let scaled = significand * scale  // < 2^53 × 2^10
            let right = -power
            var quotient: UInt64 = 0
            if right < 64 {
                quotient = scaled >> UInt64(right)
                let remainder = scaled & ((1 << UInt64(right)) - 1)
                let half: UInt64 = 1 << UInt64(right - 1)
                if remainder > half || (remainder == half && quotient & 1 == 1) { quotient += 1 }
            }  // (else scaled < 2^63 ≤ half: rounds to 0)
            digits = Array(String(quotient).utf8)
        }
        // at least decimals + 1 digits, then the point before the last `decimals`
        if digits.count <= decimals { digits.insert(contentsOf: repeatElement(UInt8(ascii: "0"), count: decimals + 1 - digits.count), at: 0) }
        var text = sign
        text.unicodeScalars.reserveCapacity(digits.count + 2)
        let integerCount = digits.count - decimals
        text += String(decoding: digits[..<integerCount], as: UTF8.self)
        if decimals > 0 { text += "." + String(decoding: digits[integerCount...], as: UTF8.self) }
        return text
    }

    /// The decimal digits of `value × 2^power × factor` (an integer).
    private static func decimalDigits(_ value: UInt64, timesPowerOfTwo power: Int, times factor: UInt64) -> [UInt8] {
        // little-endian limbs of 10^9
        var limbs: [UInt64] = []
        var rest = value
        while rest > 0 { limbs.append(rest % 1_000_000_000); rest /= 1_000_000_000 }
        func multiply(by m: UInt64) {  // m < 2^32
            var carry: UInt64 = 0
            for i in limbs.indices {
                let product = limbs[i] * m + carry
                limbs[i] = product % 1_000_000_000
                carry = product / 1_000_000_000
            }
            while carry > 0 { limbs.append(carry % 1_000_000_000); carry /= 1_000_000_000 }
        }
        var remaining = power
        while remaining > 0 {
            let step = min(remaining, 31)
            multiply(by: 1 << UInt64(step))
            remaining -= step
        }
        multiply(by: factor)
        guard let top = limbs.last else { return [UInt8(ascii: "0")] }
        var digits = Array(String(top).utf8)
        for limb in limbs.dropLast().reversed() {
            let part = Array(String(limb).utf8)
            digits.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 9 - part.count))
            digits.append(contentsOf: part)
        }
        return digits
    }
}
