import Foundation
import ProxyTestSupport

// A real gRPC client and server for the issue-16 tests: Python's grpcio (from `make pydeps`), with generic method
// handlers on raw bytes, so no .proto and no code generation. The server speaks TLS with the test CA's leaf; the
// client reaches it through hookproxy with `grpc_proxy` (HTTP CONNECT) and trusts the roots it is given.

enum GRPCPeers {
    /// `server.py CHAIN KEY`: prints its port, then `sent I TIME` for each streamed message. Methods of
    /// `test.Echo`: `Unary` (echoes `echo:` + request; trailing metadata `x-trailer: yes`), `Stream` (N messages,
    /// N = the request, 0.5 s apart), `Fail` (PERMISSION_DENIED with a message).
    static let server = #"""
    import sys, time, grpc
    from concurrent import futures

    chain, key = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()

    def unary(request, context):
        context.set_trailing_metadata((("x-trailer", "yes"),))
        return b"echo:" + request

    def stream(request, context):
        for i in range(int(request.decode() or "3")):
            print("sent %d %.6f" % (i, time.time()), flush=True)
            yield ("message %d" % i).encode()
            time.sleep(0.5)

    def fail(request, context):
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "no entry for " + request.decode())

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, chain)]))
    server.start()
    print("port %d" % port, flush=True)
    server.wait_for_termination(timeout=120)
    """#

    /// `client.py TARGET ROOTS ROUNDS`: one of each call, then ROUNDS more unary and failing calls, each on a new
    /// channel (a new client connection, so a new upstream connection), as one JSON object on stdout.
    static let client = #"""
    import json, sys, time, grpc

    target, roots, rounds = sys.argv[1], open(sys.argv[2], "rb").read(), int(sys.argv[3])
    def connect():
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=roots))
        grpc.channel_ready_future(channel).result(timeout=20)
        return channel
    def fail(channel):
        try:
            channel.unary_unary("/test.Echo/Fail")(b"bob", timeout=20)
            return None
        except grpc.RpcError as error:
            return {"code": error.code().name, "details": error.details()}
    channel = connect()
    out = {}
    response, call = channel.unary_unary("/test.Echo/Unary").with_call(b"hello", timeout=20)
    out["unary"] = response.decode()
    out["unary_trailers"] = {k: v for k, v in call.trailing_metadata()}
    out["stream"] = [[m.decode(), time.time()] for m in channel.unary_stream("/test.Echo/Stream")(b"3", timeout=20)]
    out["fail"] = fail(channel)
    channel.close()
    out["rounds"] = []
    for i in range(rounds):
        channel = connect()
        try:
            unary = channel.unary_unary("/test.Echo/Unary")(b"round %d" % i, timeout=20).decode()
        except grpc.RpcError as error:
            unary = "%s: %s" % (error.code().name, error.details())
        out["rounds"].append([unary, fail(channel)])
        channel.close()
    print(json.dumps(out), flush=True)
    """#
}

/// The gRPC server above, running until `stop`.
final class GRPCServerProcess {
    let process = ChildProcess()
    let stdoutPath: String
    private(set) var port = 0

    init(python: String, directory: TemporaryDirectory, chain: String, key: String) async throws {
        let script = try directory.write(GRPCPeers.server, to: "grpc_server.py")
        stdoutPath = directory.path + "/grpc-server.out"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: directory.path + "/grpc-server.err", contents: nil)
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, chain, key]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path + "/grpc-server.err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let started = await eventually(timeout: .seconds(30)) { [self] in
            stdout.contains("port ") || !process.isRunning
        }
        let line = stdout.components(separatedBy: "\n").first { $0.hasPrefix("port ") }
        guard started, let line, let port = Int(line.dropFirst(5)) else {
            stop()
            let err = (try? String(contentsOfFile: directory.path + "/grpc-server.err", encoding: .utf8)) ?? ""
            throw TestSupportError("the gRPC server did not start: \(stdout) \(err)")
        }
        self.port = port
    }

    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }

    /// When the server sent each streamed message (epoch seconds), by index.
    var sendTimes: [Double] {
        stdout.components(separatedBy: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            return parts.count == 3 && parts[0] == "sent" ? Double(parts[2]) : nil
        }
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}
