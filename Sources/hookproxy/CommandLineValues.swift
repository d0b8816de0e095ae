import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import ProxyModel
import ProxyServer

/// Parsing of flag values shared by the subcommands, with messages that say what is expected.
enum CommandLineValues {
    static func listenAddress(_ text: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port)
        else { throw ValidationError("--listen must be HOST:PORT (e.g. 127.0.0.1:8080), got '\(text)'") }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, port)
    }

    static func bytes(_ text: String, flag: String) throws -> Int {
        guard let value = UnitParser.bytes(text) else {
            throw ValidationError("\(flag) takes bytes or a unit (65536, 64KiB, 16MiB), got '\(text)'")
        }
        return value
    }

    static func milliseconds(_ text: String, flag: String) throws -> Int {
        guard let value = UnitParser.milliseconds(text), value > 0 else {
            throw ValidationError("\(flag) takes seconds or a unit (60, 60s, 500ms), up to 100 years, got '\(text)'")
        }
        return value
    }

    static func instant(_ text: String, flag: String) throws -> UTCInstant {
        do throws(UTCInstant.ParseError) {
            return try UTCInstant(parsing: text)
        } catch {
            throw ValidationError("\(flag): \(error)")
        }
    }

    static func throttle(_ text: String) throws -> Throttle {
        do throws(Throttle.ParseError) {
            return try Throttle(parsing: text)
        } catch {
            throw ValidationError("--throttle: \(error)")
        }
    }

    static func reverseRoutes(_ values: [String]) throws -> [ReverseRoute] {
        try values.map { value in
            do throws(ReverseRouteError) {
                return try ReverseRoute(parsing: value)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    static func makeLogger(quiet: Bool, verbose: Bool) -> Logger {
        var logger = Logger(label: "hookproxy") { label in StreamLogHandler.standardError(label: label) }
        logger.logLevel = verbose ? .debug : (quiet ? .warning : .info)
        return logger
    }
}

/// stdout carries the listening line and exchange lines; stderr warnings and errors. Both unbuffered.
enum StandardStreams {
    static func output(_ line: String) {
        StandardStream.write(line + "\n", to: STDOUT_FILENO)
    }

    static func error(_ line: String) {
        StandardStream.write(line + "\n", to: STDERR_FILENO)
    }
}
