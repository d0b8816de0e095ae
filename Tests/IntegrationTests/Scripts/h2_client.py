"""An HTTP/2 client for hookproxy's tests, on the `h2` package (an implementation independent of ours), for what
swift-nio-http2 will not send: a request head split into HEADERS and CONTINUATION frames (NIO never splits one).

    h2_client.py PROXY_URL HOST PORT CA_FILE SCENARIO

It opens a CONNECT tunnel to HOST:PORT through PROXY_URL, speaks TLS (trusting CA_FILE) with ALPN h2, runs
SCENARIO and prints one JSON object with what it saw: each stream's status, body length and reset code, the GOAWAY
code if one came, and how many frames carried the large head. It exits 0 unless the client itself failed.
"""
import json, random, socket, ssl, string, sys, time

import h2.config, h2.connection, h2.events

proxy, host, port, cafile, scenario = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
proxy_host, proxy_port = proxy.removeprefix("http://").rsplit(":", 1)
out = {"streams": {}, "goaway": None}


def tunnel():
    raw = socket.create_connection((proxy_host, int(proxy_port)), timeout=20)
    raw.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(4096)
        if not chunk:
            raise SystemExit("the proxy closed the tunnel before answering CONNECT")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"CONNECT refused: {head!r}")
    context = ssl.create_default_context(cafile=cafile)
    context.set_alpn_protocols(["h2"])
    tls = context.wrap_socket(raw, server_hostname=host)
    if tls.selected_alpn_protocol() != "h2":
        raise SystemExit(f"ALPN chose {tls.selected_alpn_protocol()}")
    return tls


class Client:
    def __init__(self):
        self.sock = tunnel()
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)
        return data

    def request(self, path, extra=()):
        stream = self.conn.get_next_available_stream_id()
        out["streams"][str(stream)] = {"path": path, "status": None, "body": 0, "reset": None, "ended": False}
        headers = [(":method", "GET"), (":scheme", "https"), (":authority", f"{host}:{port}"), (":path", path)]
        self.conn.send_headers(stream, headers + list(extra), end_stream=True)
        return stream, self.flush()

    def pump(self, done, seconds=20):
        """Reads and answers frames until done() or the deadline."""
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline and out["goaway"] is None:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            if not data:
                out["closed"] = True
                break
            for event in self.conn.receive_data(data):
                self.record(event)
            self.flush()

    def record(self, event):
        stream = out["streams"].get(str(getattr(event, "stream_id", 0)))
        if isinstance(event, h2.events.ResponseReceived):
            stream["status"] = int(dict(event.headers)[b":status"])
        elif isinstance(event, h2.events.DataReceived):
            stream["body"] += len(event.data)
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            stream["ended"] = True
        elif isinstance(event, h2.events.StreamReset):
            stream["reset"], stream["ended"] = int(event.error_code), True
        elif isinstance(event, h2.events.ConnectionTerminated):
            out["goaway"] = int(event.error_code)


def frames(data):
    """The frame types in a run of serialized frames."""
    types, offset = [], 0
    while offset + 9 <= len(data):
        length = int.from_bytes(data[offset:offset + 3], "big")
        types.append(data[offset + 3])
        offset += 9 + length
    return types


def big_head():
    """A request in flight (a slow drip), then a head of 40 distinct 4 KiB fields (~160 KiB) that HPACK cannot
    shrink much, at the 16 KiB frame size: HEADERS and six or more CONTINUATION frames; then one more request."""
    client = Client()
    drip, _ = client.request("/drip?chunks=6&interval_ms=200&size=16")
    client.pump(lambda: out["streams"][str(drip)]["status"] is not None)
    letters = string.ascii_letters + string.digits
    fields = [(f"x-big-{i}", "".join(random.choice(letters) for _ in range(4096))) for i in range(40)]
    big, sent = client.request("/head-test", fields)
    out["head_frames"] = len(frames(sent))
    client.pump(lambda: all(s["ended"] for s in out["streams"].values()))
    if out["goaway"] is None:
        client.request("/head-test")
        client.pump(lambda: all(s["ended"] for s in out["streams"].values()))


{"big-head": big_head}[scenario]()
print(json.dumps(out))
