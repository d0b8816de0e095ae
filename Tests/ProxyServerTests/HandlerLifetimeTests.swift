import NIOCore
import NIOEmbedded
import Testing
@testable import ProxyServer

/// A closed client connection lets go of its handler (and so of its channel). The handler used to keep its
/// context, which keeps the handler: every connection stayed in memory, about 0.75 KiB each, found by a soak whose
/// memory grew with the number of connections (heaptrack named ProxyRequestHandler).
@Suite struct HandlerLifetimeTests {
    @Test("a connection that served a request and closed frees its ProxyRequestHandler")
    func servedAndClosed() async throws {
        try await ProxyRequestHandlerTests.withContext { context, _ in
            weak var handler: ProxyRequestHandler?
            do {
                let channel = try ProxyRequestHandlerTests.makeChannel(context)
                handler = try channel.pipeline.syncOperations.handler(type: ProxyRequestHandler.self)
                // hookproxy's own page: answered locally, nothing goes upstream
                try ProxyRequestHandlerTests.send(channel, "GET / HTTP/1.1\r\nHost: \(ProxyRequestHandlerTests.own)\r\nConnection: close\r\n\r\n")
                #expect(try ProxyRequestHandlerTests.responses(channel).first?.status == 200)
                ProxyRequestHandlerTests.finish(channel)
            }
            #expect(handler == nil, "the handler outlived its closed connection")
        }
    }

    @Test("a connection closed before any request frees its ProxyRequestHandler")
    func closedIdle() async throws {
        try await ProxyRequestHandlerTests.withContext { context, _ in
            weak var handler: ProxyRequestHandler?
            do {
                let channel = try ProxyRequestHandlerTests.makeChannel(context)
                handler = try channel.pipeline.syncOperations.handler(type: ProxyRequestHandler.self)
                ProxyRequestHandlerTests.finish(channel)
            }
            #expect(handler == nil, "the handler outlived its closed connection")
        }
    }
}
