import NIOCore
@testable import ProxyServer
import ProxyTestSupport
import Testing

/// An accepted client connection has TCP_NODELAY (set per connection: NIO's setting on the listening socket does not
/// reach accepted ones, which this test found) and NIO's default of 4 reads per wake-up, which is not set again.
struct ClientSocketOptionsTests {
    @Test func acceptedConnectionsHaveNoDelay() async throws {
        try await withProxy { proxy in
            try await withRawClient(proxy) { _ in
                #expect(await eventually(timeout: .seconds(10)) { !proxy.server.context.connections.openChannels.isEmpty })
                let channel = try #require(proxy.server.context.connections.openChannels.first)
                let noDelay = try await channel.getOption(.socketOption(.tcp_nodelay)).get()
                #expect(noDelay != 0)
                #expect(try await channel.getOption(.maxMessagesPerRead).get() == 4)
            }
        }
    }
}
