// swift-tools-version:6.0
import PackageDescription

// Dependency versions are the ones the build machines' package mirror holds.
let package = Package(
    name: "hookproxy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "hookproxy", targets: ["hookproxy"]),
        // For the fuzz package in Fuzz/ (it depends on this package by path); automatic libraries add no build step.
        .library(name: "ProxyModel", targets: ["ProxyModel"]),
        .library(name: "ProxyRules", targets: ["ProxyRules"]),
        .library(name: "ProxyLog", targets: ["ProxyLog"]),
        .library(name: "ProxyUpstream", targets: ["ProxyUpstream"]),
        .library(name: "ProxyServer", targets: ["ProxyServer"]),
        .library(name: "ProxyUI", targets: ["ProxyUI"]),
        .library(name: "ProxyTestSupport", targets: ["ProxyTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
    ],
    targets: [
        // C worlds: system libraries behind static-inline shims. Only ProxyUpstream imports them (CPCRE2 and
        // CLibYAML: ProxyRules).
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        // PCRE2 (8-bit), for the rules' regular expressions. Only ProxyRules/PCRE2 imports it.
        .systemLibrary(name: "CPCRE2", path: "Sources/CPCRE2", pkgConfig: "libpcre2-8",
                       providers: [.apt(["libpcre2-dev"])]),
        // libyaml's event parser, for rule files: only Sources/ProxyRules/LibYAML imports it (it composes YAMLNode).
        .systemLibrary(name: "CLibYAML", path: "Sources/CLibYAML", pkgConfig: "yaml-0.1",
                       providers: [.apt(["libyaml-dev"])]),
        // Linux's epoll and eventfd, for the upstream engine's socket watcher (Glibc's module leaves them out).
        .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),

        .target(name: "ProxyModel"),
        .target(name: "ProxyRules", dependencies: [
            "ProxyModel", "CPCRE2", "CLibYAML",
            .product(name: "CompressNIO", package: "compress-nio"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .target(name: "ProxyLog", dependencies: [
            "ProxyModel",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "ProxyUpstream", dependencies: [
            "ProxyModel", "CCurl", "COpenSSL", "CEpoll",
            .product(name: "NIOCore", package: "swift-nio"),
            // NIOPosix: a handed-over connection without curl's TLS is carried on a channel of its loop.
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "ProxyServer", dependencies: [
            "ProxyModel", "ProxyRules", "ProxyUpstream", "ProxyLog", "ProxyUI",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            // NIOEmbedded hosts NIO's codecs for bytes that do not come from a NIO channel (an upgraded upstream
            // connection curl made); NIOWebSocket parses and writes the frames; CompressNIO undoes permessage-deflate.
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "CompressNIO", package: "compress-nio"),
            .product(name: "NIOTLS", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            .product(name: "NIOHPACK", package: "swift-nio-http2"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The traffic viewer: the flow store, its JSON API and the page's files (embedded, served as written).
        .target(name: "ProxyUI", dependencies: ["ProxyModel", "ProxyLog"],
                resources: [.embedInCode("Assets/index.html"), .embedInCode("Assets/app.js"),
                            .embedInCode("Assets/filter.js"), .embedInCode("Assets/app.css"),
                            .embedInCode("Assets/openapi.json")]),
        // `hookproxy replay`: HAR entries back to requests, and a client that sends them to a hookproxy listener.
        .target(name: "ProxyReplay", dependencies: [
            "ProxyModel",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        // Fixtures (origins, CA, temporary directories) know nothing of the proxy: a leaf beside the product.
        .target(name: "ProxyTestSupport", dependencies: [
            "ProxyModel",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOTLS", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            .product(name: "NIOHPACK", package: "swift-nio-http2"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .executableTarget(name: "hookproxy", dependencies: [
            "ProxyModel", "ProxyRules", "ProxyServer", "ProxyUpstream", "ProxyLog", "ProxyReplay", "ProxyUI",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        .testTarget(name: "ProxyModelTests", dependencies: ["ProxyModel"]),
        .testTarget(name: "ProxyRulesTests", dependencies: ["ProxyRules", "ProxyModel"]),
        .testTarget(name: "ProxyLogTests", dependencies: ["ProxyLog", "ProxyModel", "ProxyTestSupport"]),
        .testTarget(name: "ProxyUpstreamTests", dependencies: [
            "ProxyUpstream", "ProxyModel", "ProxyTestSupport",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .testTarget(name: "ProxyServerTests", dependencies: [
            "ProxyServer", "ProxyModel", "ProxyTestSupport",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .testTarget(name: "ProxyUITests", dependencies: ["ProxyUI", "ProxyModel", "ProxyLog"]),
        .testTarget(name: "ProxyReplayTests", dependencies: ["ProxyReplay", "ProxyModel", "ProxyTestSupport"]),
        .testTarget(name: "DockerfileTests", dependencies: ["ProxyTestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: [
            "ProxyServer", "ProxyModel", "ProxyRules", "ProxyTestSupport", "ProxyUI", "ProxyLog",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            .product(name: "NIOHPACK", package: "swift-nio-http2"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ], exclude: ["Scripts"]),  // Python peers the tests run (read from the source tree)
    ],
    swiftLanguageModes: [.v6]
)
