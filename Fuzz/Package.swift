// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets for hookproxy. A package of its own so that the main package's `swift build`,
// `swift build --build-tests` and release builds never compile any of it. Build and run with `make fuzz`
// (see README.md here): every Swift module is compiled with `-sanitize=fuzzer,address` into .build-fuzz.
// The parent package's identity is its directory's name (`main` in /work/main, something else in another clone).
let parentPackage = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "main").lowercased()

let package = Package(
    name: "hookproxy-fuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .target(name: "CFuzzerDriver", path: "Sources/CFuzzerDriver"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzerDriver"], path: "Sources/FuzzSupport"),
        .executableTarget(name: "fuzz-rules", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyRules", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
        ], path: "Sources/fuzz-rules"),
        .executableTarget(name: "fuzz-request", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyServer", package: parentPackage),
            .product(name: "ProxyRules", package: parentPackage),
            .product(name: "ProxyLog", package: parentPackage),
            .product(name: "ProxyUpstream", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Sources/fuzz-request"),
        .executableTarget(name: "fuzz-response-head", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyUpstream", package: parentPackage),
            .product(name: "ProxyServer", package: parentPackage),
            .product(name: "ProxyRules", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], path: "Sources/fuzz-response-head"),
        .executableTarget(name: "fuzz-logs", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyLog", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
            .product(name: "ProxyTestSupport", package: parentPackage),
        ], path: "Sources/fuzz-logs"),
        .executableTarget(name: "fuzz-websocket", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyServer", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
        ], path: "Sources/fuzz-websocket"),
        .executableTarget(name: "fuzz-url", dependencies: [
            "FuzzSupport",
            .product(name: "ProxyRules", package: parentPackage),
            .product(name: "ProxyModel", package: parentPackage),
        ], path: "Sources/fuzz-url"),
    ],
    swiftLanguageModes: [.v6]
)
