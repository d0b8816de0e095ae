/// The page's files, embedded in the binary from `Sources/ProxyUI/Assets` (no build step: the files are served as
/// written). Immutable.
enum ViewerAssets {
    struct File {
        let bytes: [UInt8]
        let contentType: String
        let isPage: Bool
    }

    static func file(at path: String) -> File? {
        switch path {
        case "/", "/index.html": File(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8", isPage: true)
        case "/app.js": File(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8", isPage: false)
        case "/filter.js": File(bytes: PackageResources.filter_js, contentType: "text/javascript; charset=utf-8", isPage: false)
        case "/app.css": File(bytes: PackageResources.app_css, contentType: "text/css; charset=utf-8", isPage: false)
        case "/api/openapi.json": File(bytes: PackageResources.openapi_json, contentType: "application/json", isPage: false)
        default: nil
        }
    }
}
