"""A TLS client through hookproxy's interception that stops and keeps its socket open (ImmediateClose's tests).

    tls_stalled_client.py PROXY_PORT HOST PORT CAFILE MODE

CONNECT HOST:PORT through the proxy on 127.0.0.1:PROXY_PORT, TLS trusting only CAFILE, then by MODE:
  download  GET /bytes/200000000, read the head and a few bytes, then read nothing more;
  upload    POST /upload with Content-Length 8 MiB, send 64 KiB of it, then send and read nothing more.
Prints "stalled" once it stopped, then holds its socket open, without reading, until its stdin closes.
"""
import socket
import ssl
import sys

proxy_port, host, port, cafile, mode = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=20)
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
raw.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = raw.recv(1)
    if not chunk:
        sys.exit("the proxy closed during CONNECT")
    head += chunk
if b" 200 " not in head.split(b"\r\n")[0]:
    sys.exit(f"CONNECT answered {head!r}")
context = ssl.create_default_context(cafile=cafile)
tls = context.wrap_socket(raw, server_hostname=host)
if mode == "download":
    tls.sendall(f"GET /bytes/200000000 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += tls.recv(4096)
elif mode == "upload":
    tls.sendall(f"POST /upload HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {8 << 20}\r\n\r\n".encode())
    tls.sendall(b"u" * 65536)
else:
    sys.exit(f"unknown mode {mode}")
print("stalled", flush=True)
sys.stdin.read()
