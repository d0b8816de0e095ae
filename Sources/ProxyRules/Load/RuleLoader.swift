import FoundationEssentials
import ProxyModel
#if canImport(Glibc)
import Glibc
#endif

/// Loads `--rules` paths into one validated RuleSet, or fails with every error of every file.
///
/// Paths are files, or directories read non-recursively (`*.yaml`, `*.yml`; hidden and backup files ignored).
/// Files load in name order (directory by directory, in the order the paths were given). Relative paths inside
/// a rule file resolve against that file's directory. Pure apart from reading files and the environment; safe
/// to call from any thread.
public enum RuleLoader {
    /// Rule files larger than this are refused (they are written by hand; this is a guard against mistakes).
    public static let maxFileBytes = 4 << 20
    /// Bound on a file's nodes with aliases expanded, which the composer (keys) and the parser (values) walk. A
    /// file within `maxFileBytes` (2 bytes a node at the least) reaches it only through aliases.
    static let maxExpandedNodes = 4_000_000

    /// Loads every rule file under `paths`.
    /// - Throws: `RuleLoadFailure` holding every error (as `file:line:col: message`) of every file.
    public static func load(paths: [String],
                            environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(RuleLoadFailure) -> RuleSet {
        try load(paths: paths, environment: environment, missingFilesAreErrors: true)
    }

    /// `missingFilesAreErrors: false` is for hot reload: a rule file given by name that was deleted then
    /// contributes no rules, with a warning. A missing directory (one of `directories`, the paths that were
    /// directories at start, or a path ending in `/`) is still an error: the rules in force stay.
    static func load(paths: [String], environment: [String: String], missingFilesAreErrors: Bool,
                     directories: Set<String> = []) throws(RuleLoadFailure) -> RuleSet {
        var (files, errors, warnings) = ruleFiles(in: paths, missingFilesAreErrors: missingFilesAreErrors,
                                                  directories: directories)
        var rules: [Rule] = []
        var namesSeen: [String: RuleError] = [:]
        var dependencies: [String] = []
        for file in files {
            let ctx = FileContext(file: file.display, directory: PathText.deletingLastComponent(file.path),
                                  environment: environment)
            var parsed: [RuleParser.Parsed] = []
            if let root = readYAML(file.path, ctx: ctx) {
                parsed = RuleParser(ctx: ctx).parseFile(root)
            }
            for item in parsed {
                let mark = item.nameNode.mark
                let here = RuleError(file: file.display, line: mark.line, column: mark.column, message: "")
                if let first = namesSeen[item.rule.name] {
                    ctx.error(item.nameNode, "duplicate rule name '\(item.rule.name)' (first defined at \(first.file):\(first.line):\(first.column)); names are unique across all files")
                } else {
                    namesSeen[item.rule.name] = here
                    rules.append(item.rule)
                }
            }
            errors += ctx.errors
            warnings += ctx.warnings
            dependencies += ctx.dependencies
        }
        if !errors.isEmpty { throw RuleLoadFailure(errors: errors, warnings: warnings) }
        return RuleSet(rules: rules, files: files.map(\.display), warnings: warnings, dependencies: dependencies)
    }

    /// A rule file to read: its path as shown in messages and the path to open.
    struct RuleFile: Hashable {
        var display: String
        var path: String
    }

    static func isRuleFileName(_ name: String) -> Bool {
        guard !name.hasPrefix("."), !name.hasSuffix("~") else { return false }
        return name.hasSuffix(".yaml") || name.hasSuffix(".yml")
    }

    static func ruleFiles(in paths: [String], missingFilesAreErrors: Bool = true, directories: Set<String> = [])
        -> ([RuleFile], [RuleError], [RuleWarning]) {
        var files: [RuleFile] = []
        var errors: [RuleError] = []
        var warnings: [RuleWarning] = []
        var seen = Set<String>()
        let manager = FileManager.default
        for path in paths {
            var isDirectory = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
                if missingFilesAreErrors || path.hasSuffix("/") {
                    errors.append(RuleError(file: path, line: 1, column: 1, message: "--rules path does not exist"))
                } else if directories.contains(path) {
                    errors.append(RuleError(file: path, line: 1, column: 1, message: "--rules directory no longer exists"))
                } else {
                    warnings.append(RuleWarning(file: path, line: 1, column: 1, message: "rule file no longer exists: it contributes no rules"))
                }
                continue
            }
            if isDirectory {
                guard let names = try? manager.contentsOfDirectory(atPath: path) else {
                    errors.append(RuleError(file: path, line: 1, column: 1, message: "directory cannot be read"))
                    continue
                }
                for name in names.sorted() where isRuleFileName(name) {
                    let full = PathText.appending(name, to: path)
                    let display = path.hasSuffix("/") ? path + name : path + "/" + name
                    var childIsDirectory = false
                    guard manager.fileExists(atPath: full, isDirectory: &childIsDirectory), !childIsDirectory
                    else {
                        // A name that looks like a rule file but is not one: say so, rather than drop it unseen.
                        let what = childIsDirectory ? "a directory" : "a symbolic link to nothing"
                        warnings.append(RuleWarning(file: display, line: 1, column: 1, message: "\(what), not a rule file: ignored"))
                        continue
                    }
                    if seen.insert(absolute(full)).inserted { files.append(RuleFile(display: display, path: full)) }
                }
            } else if seen.insert(absolute(path)).inserted {
                files.append(RuleFile(display: path, path: path))
            }
        }
        return (files, errors, warnings)
    }

    static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : PathText.appending(path, to: FileManager.default.currentDirectoryPath)
        return PathText.lexicallyNormal(PathText.expandingTilde(full))
    }

    // MARK: reading one file

    /// The root node of a rule file, or nil with the reason reported.
    static func readYAML(_ path: String, ctx: FileContext) -> YAMLNode? {
        var status = stat()
        if stat(path, &status) == 0, Int(status.st_size) > maxFileBytes {
            ctx.error(at: nil, "file is \(status.st_size) bytes; rule files are limited to \(maxFileBytes) bytes (4 MiB)")
            return nil
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            ctx.error(at: nil, "file cannot be read")
            return nil
        }
        guard data.count <= maxFileBytes else {
            ctx.error(at: nil, "file is \(data.count) bytes; rule files are limited to \(maxFileBytes) bytes (4 MiB)")
            return nil
        }
        let bytes = [UInt8](data)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            let offset = invalidUTF8Offset(bytes)
            let (line, column) = position(ofByte: offset, in: bytes)
            ctx.error(line: line, column: column, "file is not UTF-8 text (invalid byte 0x\(String(bytes[offset], radix: 16, uppercase: true)))")
            return nil
        }
        if text.contains("\0") {
            let offset = bytes.firstIndex(of: 0) ?? 0
            let (line, column) = position(ofByte: offset, in: bytes)
            ctx.error(line: line, column: column, "file holds a NUL byte; rule files are text")
            return nil
        }
        if let oversized = AliasExpansion.firstOversized(in: text, limit: maxExpandedNodes) {
            ctx.error(line: oversized.line, column: oversized.column,
                      "aliases expand this file to more than \(maxExpandedNodes) nodes (an alias bomb?); "
                      + "a rule file is read whole")
            return nil
        }
        let root: YAMLNode?
        do throws(YAMLSyntaxError) {
            root = try YAMLComposer.compose(text)
        } catch {
            reportYAMLError(error, text: text, ctx: ctx)
            return nil
        }
        guard let root else {
            ctx.error(at: nil, "empty rule file: expected a top-level 'rules:' list")
            return nil
        }
        return root
    }

    static func reportYAMLError(_ error: YAMLSyntaxError, text: String, ctx: FileContext) {
        var message: String
        if error.duplicateKeys.isEmpty {
            message = "not valid YAML: \(error.problem)"
            if let context = error.context, let contextMark = error.contextMark {
                message += " (\(context) at line \(contextMark.line))"
            }
        } else {
            message = "duplicate key \(error.duplicateKeys.map { "'\($0)'" }.joined(separator: ", ")) in one mapping"
        }
        // A tab where YAML wants indentation gives libyaml's cryptic "cannot start any token"; say what it is.
        if let tab = firstIndentationTab(text), tab.line <= error.mark.line {
            ctx.error(line: tab.line, column: tab.column, "tab character in indentation; YAML indents with spaces")
            return
        }
        ctx.error(line: error.mark.line, column: error.mark.column, message)
    }

    /// The first tab inside a line's leading whitespace, outside block scalars we cannot know about cheaply.
    static func firstIndentationTab(_ text: String) -> (line: Int, column: Int)? {
        var line = 1
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var column = 1
            for char in rawLine {
                if char == "\t" { return (line, column) }
                if char != " " { break }
                column += 1
            }
            line += 1
        }
        return nil
    }

    static func invalidUTF8Offset(_ bytes: [UInt8]) -> Int {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded): offset += encoded.count
            case .emptyInput: return min(offset, max(0, bytes.count - 1))
            case .error: return offset
            }
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    static func position(ofByte offset: Int, in bytes: [UInt8]) -> (Int, Int) {
        let prefix = bytes[..<offset]
        let line = prefix.filter { $0 == 0x0A }.count + 1
        let lineStart = (prefix.lastIndex(of: 0x0A).map { $0 + 1 }) ?? 0
        let column = String(decoding: bytes[lineStart..<offset], as: UTF8.self).count + 1
        return (line, column)
    }

    // MARK: check

    /// What `hookproxy check` prints and returns.
    public struct CheckReport: Sendable {
        /// 0 when the rules load, else 1.
        public var exitCode: Int32
        /// `ok: N rules in M files` (with a newline) on success, else "".
        public var standardOutput: String
        /// Warnings, and every error as `file:line:col: message`, one per line.
        public var standardError: String
    }

    /// Loads the rules and renders the result for `hookproxy check`.
    public static func check(paths: [String],
                             environment: [String: String] = ProcessInfo.processInfo.environment) -> CheckReport {
        do throws(RuleLoadFailure) {
            let set = try load(paths: paths, environment: environment)
            let warnings = set.warnings.map { "\($0)\n" }.joined()
            return CheckReport(exitCode: 0, standardOutput: set.summary + "\n", standardError: warnings)
        } catch {
            let text = (error.warnings.map(\.description) + error.errors.map(\.description)).map { "\($0)\n" }.joined()
            return CheckReport(exitCode: 1, standardOutput: "", standardError: text)
        }
    }
}
