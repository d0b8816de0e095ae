import ProxyModel

/// gRPC's "Trailers-Only" answer (an error before any message): one HEADERS frame that ends the stream and carries
/// `grpc-status` with the response head. libcurl hands it over as a head, and the client side's HTTP/2 codec can
/// end a stream only after the head (with an empty DATA frame), which gRPC clients read as a stream without status.
/// So for a client that takes trailers, these fields leave the head and go out as the response's trailers: the
/// equivalent form the gRPC protocol also allows (headers, no message, trailers). Pure value code.
enum GRPCTrailersOnly {
    static let statusFields = ["grpc-status", "grpc-message", "grpc-status-details-bin"]

    /// Removes the status fields from `headers` and returns them; nil when there is no `grpc-status`.
    static func split(_ headers: inout HeaderFields) -> HeaderFields? {
        guard headers.contains("grpc-status") else { return nil }
        let moved = HeaderFields(headers.filter { field in statusFields.contains { field.name.caseInsensitiveEquals($0) } })
        headers.removeAll { field in statusFields.contains { field.name.caseInsensitiveEquals($0) } }
        return moved
    }
}
