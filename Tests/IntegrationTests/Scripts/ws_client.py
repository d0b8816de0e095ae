"""A WebSocket client for hookproxy's tests, on the `websockets` package (an implementation independent of ours).

    ws_client.py PROXY_URL TARGET_URL SCENARIO [CA_FILE]

It reaches TARGET_URL (ws:// or wss://) through PROXY_URL with CONNECT, as `websockets` does for proxies (the
`absolute` scenario instead sends the handshake as an absolute-form GET http://… to the proxy, by hand). It prints
one JSON object with what it saw, and exits 0 unless the client itself failed.
"""
import asyncio, base64, json, os, socket, ssl, struct, sys, zlib

import websockets
from websockets.exceptions import ConnectionClosed

proxy, target, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
cafile = sys.argv[4] if len(sys.argv) > 4 else None
out = {}


def connect(**extra):
    # no keepalive pings of its own: a loaded machine must not turn a slow pong into a failure (the echo
    # scenario pings on purpose)
    kwargs = dict(proxy=proxy, max_size=None, open_timeout=20, close_timeout=10, compression=None, ping_interval=None)
    if target.startswith("wss://"):
        kwargs["ssl"] = ssl.create_default_context(cafile=cafile)
    kwargs.update(extra)
    return websockets.connect(target, **kwargs)


async def deflate_server(handler, compression="deflate", **extra):
    """The deflate scenarios' own server (the `websockets` one, which negotiates permessage-deflate), on TLS with the
    certificate and key in WS_SERVER_CERT / WS_SERVER_KEY, on a free port; TARGET becomes its URL (its port ignored)."""
    global target
    server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ssl.load_cert_chain(os.environ["WS_SERVER_CERT"], os.environ["WS_SERVER_KEY"])
    server = await websockets.serve(handler, "127.0.0.1", 0, ssl=server_ssl, compression=compression, **extra)
    target = f"wss://localhost:{server.sockets[0].getsockname()[1]}/deflate"
    return server


async def echo(ws):
    await ws.send("hello text")
    out["text"] = await ws.recv()
    await ws.send(b"\x00\x01\x02binary\xff")
    out["binary"] = base64.b64encode(await ws.recv()).decode()
    await ws.send(["frag-", "ment", "ed"])          # one message in three frames
    out["fragmented"] = await ws.recv()
    pong = await ws.ping(b"are you there")
    out["pong_latency"] = await asyncio.wait_for(pong, 20)
    await ws.close(1000, "done")
    out["close_code"] = ws.close_code


async def main():
    if scenario == "absolute":
        return absolute()
    if scenario == "many":
        async def session(i):
            async with connect() as ws:
                for j in range(50):
                    await ws.send(f"session {i} message {j}")
                    assert await ws.recv() == f"session {i} message {j}"
            return 50
        results = await asyncio.gather(*(session(i) for i in range(30)))
        out["messages"] = sum(results)
        return
    try:
        if scenario == "echo":
            async with connect() as ws:
                out["response_headers"] = dict(ws.response.headers)
                await echo(ws)
        elif scenario == "deflate":
            async def echo_handler(ws):
                async for message in ws:
                    await ws.send(message)
            server = await deflate_server(echo_handler)
            out["port"] = server.sockets[0].getsockname()[1]
            async with connect(compression="deflate") as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                for text in ["compressed hello " * 20, "and again " * 30]:
                    await ws.send(text)
                    out.setdefault("replies", []).append(await ws.recv() == text)
                await ws.close(1000)
            server.close()
        elif scenario == "deflate-edit":
            # As "deflate", with messages the proxy's rules edit: several, so a window carried from message to
            # message (context takeover, the websockets default) must stay right at both ends.
            received = []

            async def echo_handler(ws):
                async for message in ws:
                    received.append(message if isinstance(message, str) else "binary:%d" % len(message))
                    await ws.send(message)
            server = await deflate_server(echo_handler)
            async with connect(compression="deflate") as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                binary = bytes(range(256)) * 64
                for message in ["compressed hello " * 20, "and again " * 30, binary, "hello once more " * 10]:
                    await ws.send(message)
                    reply = await ws.recv()
                    out.setdefault("replies", []).append(
                        reply if isinstance(reply, str) else ("binary intact" if reply == binary else "binary changed"))
                await ws.close(1000)
            out["server_received"] = received
            server.close()
        elif scenario == "deflate-corrupt":
            # As "deflate", but the server answers the first message with raw bytes, in one write: a compressed
            # frame that is not deflate data, then a plain text frame.

            async def corrupt_handler(ws):
                await ws.recv()
                corrupt = b"\xc1\x05" + b"\xff" * 5  # FIN, RSV1 (compressed), text; block type 3 does not exist
                ws.transport.write(corrupt + b"\x81\x05after")
                await asyncio.sleep(10)
            server = await deflate_server(corrupt_handler)
            async with connect(compression="deflate") as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                await ws.send("go")
                received = []
                try:
                    while True:
                        received.append(await asyncio.wait_for(ws.recv(), 10))
                except ConnectionClosed as closed:
                    out["closed"] = True
                    out["close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
                except asyncio.TimeoutError:
                    out["timed_out"] = True
                out["received"] = received
            server.close()
        elif scenario == "deflate-corrupt-client":
            # The other way: the client sends, in one write, a compressed frame that is not deflate data and then a
            # plain text frame (both masked, as a client's must be).
            received = []

            async def recording_handler(ws):
                try:
                    async for message in ws:
                        received.append(message)
                except ConnectionClosed:
                    pass
                out["server_close"] = [ws.close_code, ws.close_reason]
            server = await deflate_server(recording_handler)

            def masked(first, payload):
                key = b"\x11\x22\x33\x44"
                return bytes([first, 0x80 | len(payload)]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            async with connect(compression="deflate") as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                ws.transport.write(masked(0xC1, b"\xff" * 5) + masked(0x81, b"after"))
                try:
                    await asyncio.wait_for(ws.recv(), 10)
                except ConnectionClosed as closed:
                    out["closed"] = True
                    out["close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
                except asyncio.TimeoutError:
                    out["timed_out"] = True
            await asyncio.sleep(0.5)
            out["server_received"] = received
            server.close()
        elif scenario == "deflate-bfinal":
            # The client compresses each message as a whole DEFLATE stream, its last block with BFINAL set (RFC 7692
            # §7.2.3.4 allows it; the next message starts a new stream), written raw; the server (websockets, context
            # takeover) echoes what hookproxy, editing this direction, compressed again.
            received = []

            async def echo_handler(ws):
                async for message in ws:
                    received.append(message)
                    await ws.send(message)
            server = await deflate_server(echo_handler)

            def masked(first, payload):
                key = os.urandom(4)
                n = len(payload)
                length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
                return bytes([first]) + length + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            async with connect(compression="deflate") as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                for text in ["one " * 20, "two " * 20 + "one", "three " * 20]:
                    stream = zlib.compressobj(wbits=-15)
                    ws.transport.write(masked(0xC1, stream.compress(text.encode()) + stream.flush(zlib.Z_FINISH)))
                    out.setdefault("replies", []).append(await asyncio.wait_for(ws.recv(), 20))
                await ws.close(1000)
            out["server_received"] = received
            server.close()
        elif scenario == "huge":
            # A 20 MiB message sent as one frame (binary, or text when WS_MESSAGE is "text"), echoed by the server as
            # one frame too, with permessage-deflate when WS_COMPRESSION is "deflate" (random bytes: the compressed
            # frames stay big). Both ends compare what they got with what was sent.
            compression = os.environ.get("WS_COMPRESSION") or None
            if os.environ.get("WS_MESSAGE") == "text":
                sent = base64.b64encode(os.urandom(15 * 1024 * 1024)).decode()
            else:
                sent = os.urandom(20 * 1024 * 1024)
            server_equal = []

            async def echo_handler(ws):
                async for message in ws:
                    server_equal.append(message == sent)
                    await ws.send(message)
            server = await deflate_server(echo_handler, compression=compression, max_size=None)
            async with connect(compression=compression) as ws:
                out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
                await ws.send(sent)
                out["echoed"] = await asyncio.wait_for(ws.recv(), 60) == sent
                await ws.close(1000)
            out["server_equal"] = server_equal
            server.close()
        elif scenario == "long":
            # One session of many small messages (WS_MESSAGES, 12000), each echoed before the next.
            count = int(os.environ.get("WS_MESSAGES", "12000"))
            async with connect() as ws:
                for i in range(count):
                    await ws.send("not json")
                    await ws.recv()
                await ws.close(1000)
            out["sent"] = count
        elif scenario == "big":
            async with connect() as ws:
                text = ("0123456789abcdef" * (4 * 1024 * 1024 // 16))
                await ws.send(text)
                out["big_equal"] = (await ws.recv()) == text
                data = os.urandom(4 * 1024 * 1024)
                await ws.send([data[:1000000], data[1000000:3000000], data[3000000:]])
                out["big_binary_equal"] = (await ws.recv()) == data
                await ws.close(1000)
        elif scenario == "slow-reader":
            async with connect() as ws:
                await ws.send("flood:400:65536")
                # Reads nothing until the test has seen the flood stop (it creates WS_RESUME_FILE), at most 60 s;
                # without the variable, for 4 s. The proxy must stop reading the server meanwhile.
                resume = os.environ.get("WS_RESUME_FILE")
                for _ in range(1200 if resume else 80):
                    if resume and os.path.exists(resume):
                        break
                    await asyncio.sleep(0.05)
                total = 0
                for _ in range(400):
                    total += len(await asyncio.wait_for(ws.recv(), 30))
                out["received_bytes"] = total
                await ws.close(1000)
        elif scenario == "idle":
            async with connect() as ws:
                await asyncio.sleep(2.5)                     # longer than the proxy's idle timeout in the test
                await ws.send("still here")
                out["reply"] = await ws.recv()
                await ws.close(1000)
        elif scenario == "json":
            async with connect() as ws:
                await ws.send('{"action": "hello"}')
                out["reply"] = await ws.recv()
                await ws.send(b"\x01binary stays")
                out["binary_reply"] = base64.b64encode(await ws.recv()).decode()
                await ws.close(1000)
        elif scenario == "server-close":
            async with connect() as ws:
                await ws.send("close:4001:server says bye")
                try:
                    await asyncio.wait_for(ws.recv(), 20)
                except ConnectionClosed as closed:
                    out["code"] = closed.rcvd.code if closed.rcvd else None
                    out["reason"] = closed.rcvd.reason if closed.rcvd else None
        elif scenario == "client-close":
            async with connect() as ws:
                await ws.close(4001, "client says bye")
                out["code"] = ws.close_code
                out["reason"] = ws.close_reason
        elif scenario == "vanish":
            async with connect() as ws:
                await ws.send("vanish")
                try:
                    await asyncio.wait_for(ws.recv(), 20)
                except ConnectionClosed as closed:
                    out["received_close_frame"] = closed.rcvd is not None
        elif scenario == "client-flush":
            # The client writes 128 binary messages of 64 KiB and a close frame (4002) in one go and closes its socket
            # at once (over TLS without close_notify); the server (its own: plain for ws://, TLS with WS_SERVER_CERT
            # and WS_SERVER_KEY for wss://) starts reading 1.5 s later, and slowly. It must get every message and the
            # close code.
            count, payload = 128, os.urandom(65536)
            done = asyncio.Event()
            got = {"messages": 0, "intact": True}

            async def slow_handler(ws):
                await asyncio.sleep(1.5)
                try:
                    async for message in ws:
                        got["messages"] += 1
                        got["intact"] = got["intact"] and message == payload
                        await asyncio.sleep(0.02)
                except ConnectionClosed:
                    pass
                got["close_code"], got["close_reason"] = ws.close_code, ws.close_reason
                done.set()
            server_ssl = None
            if target.startswith("wss://"):
                server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                server_ssl.load_cert_chain(os.environ["WS_SERVER_CERT"], os.environ["WS_SERVER_KEY"])
            # A small receive buffer (fixed: the kernel no longer grows it) and message queue: the server's side holds
            # little, so what it has not read yet waits in hookproxy when the client leaves.
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            listener.bind(("127.0.0.1", 0))
            server = await websockets.serve(slow_handler, sock=listener, ssl=server_ssl, max_size=None,
                                            max_queue=2, compression=None)
            port = listener.getsockname()[1]
            await asyncio.get_running_loop().run_in_executor(None, write_and_close, port, payload, count)
            await asyncio.wait_for(done.wait(), 20)
            out.update(got)
            server.close()
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    except Exception as error:  # reported, not raised: the test reads it
        out["error"] = f"{type(error).__name__}: {error}"


def write_and_close(port, payload, count):
    """client-flush's client: through the proxy (absolute-form for ws://, an intercepted CONNECT for wss://), the
    handshake, then `count` masked binary frames of `payload` and a close frame in one write, and a close at once."""
    host, proxy_port = proxy.split("//")[1].split(":")
    s = socket.create_connection((host, int(proxy_port)), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    if target.startswith("wss://"):
        s.sendall(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError(f"CONNECT: {answer!r}")
            answer += chunk
        s = ssl.create_default_context(cafile=cafile).wrap_socket(s, server_hostname="localhost")
        request_target, authority = "/flush", f"localhost:{port}"
    else:
        request_target, authority = f"http://127.0.0.1:{port}/flush", f"127.0.0.1:{port}"
    s.sendall((f"GET {request_target} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"handshake: {head[:200]!r}")
    mask = os.urandom(4)
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(mask * (len(payload) // 4), "big")).to_bytes(len(payload), "big")
    frame = b"\x82\xff" + struct.pack(">Q", len(payload)) + mask + masked
    close = struct.pack(">H", 4002) + b"client done"
    close_frame = b"\x88" + bytes([0x80 | len(close)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(close))
    s.sendall(frame * count + close_frame)
    s.close()


def absolute():
    """The handshake as an absolute-form request to the proxy (`GET http://host/path`), then one echo and a close."""
    host, port = proxy.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=20)
    http_target = "http" + target[2:]
    authority = target.split("/")[2]
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {http_target} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat\r\n\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    out["head"] = head.decode(errors="replace")

    def frame(opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
        return bytes([0x80 | opcode]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    s.sendall(frame(1, b"absolute hello"))
    while len(rest) < 2 or len(rest) < 2 + (rest[1] & 0x7F):
        chunk = s.recv(4096)
        if not chunk:
            break
        rest += chunk
    out["echo"] = rest[2:2 + (rest[1] & 0x7F)].decode(errors="replace") if len(rest) >= 2 else None
    s.sendall(frame(8, struct.pack(">H", 1000) + b"bye"))
    reply = s.recv(4096)
    out["close_reply"] = list(reply[:4])
    s.close()


asyncio.run(main())
print(json.dumps(out))
