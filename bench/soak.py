#!/usr/bin/env python3
"""The origins and load clients of bench/soak.sh (stdlib only; curl for the libcurl-client classes).

    soak.py origin  --port P --dir T [--tls CERT KEY]      an HTTP/1.1 origin (HTTPS with --tls)
    soak.py CLASS   --dir T --proxy PORT --origin P --tls-origin P --until EPOCH [--max N] [...]
    soak.py report  --dir T ...                             the final table and the pass/fail verdict

Every client class runs until --until (an epoch time) or --max iterations, whichever comes first; every socket
has a timeout and every curl a --max-time, so no step can hang. Each class writes T/results/CLASS.json every few
seconds and at exit: {"ok": n, "failed": n, "errors": {message: count}, "notes": {...}}.
"""
import argparse
import hashlib
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SMALL = bytes(range(256)) * 4           # 1 KiB
MID_SIZE = 256 * 1024
BIG_SIZE = 10 * 1024 * 1024


def big_body(d):
    with open(os.path.join(d, "10m.bin"), "rb") as f:
        return f.read()


# ------------------------------------------------------------------------------------------------------ origin
def run_origin(args):
    big = big_body(args.dir)
    mid = big[:MID_SIZE]
    # What the origin saw of the transfers clients abandon: a /slow response that runs to its end means the proxy
    # kept the upstream transfer going after its client left. Written to T/results/origin-PORT.json every 2 s.
    counts = {"slow completed": 0, "slow cut short": 0, "uploads completed": 0, "uploads cut short": 0}
    lock = threading.Lock()

    def count(key):
        with lock:
            counts[key] += 1

    def writer():
        path = os.path.join(args.dir, "results", "origin-%d.json" % args.port)
        while True:
            with lock:
                data = json.dumps(counts)
            with open(path + ".tmp", "w") as f:
                f.write(data)
            os.replace(path + ".tmp", path)
            time.sleep(2)

    threading.Thread(target=writer, daemon=True).start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "soak-origin"
        sys_version = ""

        def log_message(self, *a):
            pass

        def send_body(self, body, ctype="application/octet-stream", slow=False):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                return
            view = memoryview(body)
            if slow:        # 16 KiB every 20 ms: 10 MiB takes ~13 s, long enough to be abandoned midway
                try:
                    for i in range(0, len(view), 16384):
                        self.wfile.write(view[i:i + 16384])
                        self.wfile.flush()
                        time.sleep(0.02)
                except OSError:
                    count("slow cut short")
                    raise
                count("slow completed")
            else:
                self.wfile.write(view)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if "://" in path:       # absolute form (should never reach an origin through a proxy, but be lenient)
                path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
            if path == "/small":
                self.send_body(SMALL)
            elif path == "/256k":
                self.send_body(mid)
            elif path == "/10m":
                self.send_body(big)
            elif path == "/slow":
                self.send_body(big, slow=True)
            else:
                self.send_error(404)

        do_HEAD = do_GET

        def do_POST(self):
            try:
                self.receive()
            except (OSError, ValueError):
                count("uploads cut short")
                raise
            count("uploads completed")

        def receive(self):
            h = hashlib.sha256()
            n = 0
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    line = self.rfile.readline(1024)
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                            pass
                        break
                    left = size
                    while left:
                        chunk = self.rfile.read(min(left, 262144))
                        if not chunk:
                            raise ConnectionError("short chunk")
                        h.update(chunk)
                        n += len(chunk)
                        left -= len(chunk)
                    self.rfile.readline(16)
            else:
                left = int(self.headers.get("Content-Length", "0"))
                while left:
                    chunk = self.rfile.read(min(left, 262144))
                    if not chunk:
                        raise ConnectionError("short body")
                    h.update(chunk)
                    n += len(chunk)
                    left -= len(chunk)
            self.send_body(("%d %s\n" % (n, h.hexdigest())).encode(), "text/plain")

        def handle(self):
            try:
                super().handle()
            except (ConnectionError, ssl.SSLError, socket.timeout, OSError, ValueError):
                pass        # a client (the proxy) going away mid-exchange is part of the load

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            pass

    server = Server(("127.0.0.1", args.port), Handler)
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])
        # The handshake runs in the connection's thread (first read), not in the accept loop.
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    server.serve_forever()


# ------------------------------------------------------------------------------------------------------ clients
class Tally:
    """Counts of one class, written to T/results/CLASS.json every 5 s and at exit."""

    def __init__(self, args, name):
        self.path = os.path.join(args.dir, "results", name + ".json")
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = 0
        self.errors = {}
        self.notes = {}
        self.last = 0.0

    def good(self, n=1):
        with self.lock:
            self.ok += n
        self.flush()

    def bad(self, why, n=1):
        why = str(why)[:160]
        with self.lock:
            self.failed += n
            self.errors[why] = self.errors.get(why, 0) + n
        self.flush()

    def note(self, key, n=1):
        with self.lock:
            self.notes[key] = self.notes.get(key, 0) + n

    def flush(self, force=False):
        now = time.time()
        if not force and now - self.last < 5:
            return
        # Bounded: the SIGTERM handler flushes too, and may interrupt a thread that holds the lock.
        locked = self.lock.acquire(timeout=1)
        try:
            self.last = now
            data = {"ok": self.ok, "failed": self.failed, "errors": dict(self.errors), "notes": dict(self.notes)}
        finally:
            if locked:
                self.lock.release()
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)


def running(args, i):
    return time.time() < args.until and i < args.max


def pause(args, seconds):
    time.sleep(max(0, min(seconds, args.until - time.time())))


def read_status(sock, limit=65536):
    """Reads until the end of a response head; returns (status or None, bytes read)."""
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < limit:
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    if buf.startswith(b"HTTP/1.") and len(buf) >= 12:
        try:
            return int(buf[9:12]), buf
        except ValueError:
            pass
    return None, buf


def http_small(args, tally, keepalive):
    """One thread of keep-alive or new-connection-per-request GETs of /small (1 KiB) in absolute form."""
    host = "127.0.0.1:%d" % args.origin
    url = "http://%s/small" % host
    conn = None
    i = 0
    while running(args, i):
        i += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", args.proxy, timeout=30)
                tally.note("connections")
            headers = {"Host": host}
            if not keepalive:
                headers["Connection"] = "close"
            conn.request("GET", url, headers=headers)
            r = conn.getresponse()
            body = r.read()
            if r.status == 200 and body == SMALL:
                tally.good()
            else:
                tally.bad("status %d, %d bytes" % (r.status, len(body)))
            if not keepalive or r.will_close:
                conn.close()
                conn = None
        except Exception as e:  # noqa: BLE001 (any failure of the exchange is a failed request)
            tally.bad("%s: %s" % (type(e).__name__, e))
            if conn is not None:
                conn.close()
            conn = None
            pause(args, 0.2)
    if conn is not None:
        conn.close()


def run_threads(args, tally, target, n, *extra):
    threads = [threading.Thread(target=target, args=(args, tally) + extra, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def curl(args, argv, timeout):
    """Runs curl (bounded by --max-time and a hard subprocess timeout); returns (exit code, stdout, stderr)."""
    cmd = ["curl", "-s", "-S", "--max-time", str(timeout), "-x", "http://127.0.0.1:%d" % args.proxy] + argv
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout + 15)
        return p.returncode, p.stdout, p.stderr.decode(errors="replace").strip()
    except subprocess.TimeoutExpired:
        return -1, b"", "curl did not exit"


def cls_keepalive(args, tally):
    run_threads(args, tally, http_small, args.conns, True)


def cls_newconn(args, tally):
    run_threads(args, tally, http_small, args.conns, False)


def cls_download(args, tally):
    want = hashlib.sha256(big_body(args.dir)).hexdigest()
    i = 0
    while running(args, i):
        i += 1
        rc, out, err = curl(args, ["-o", "-", "-w", "%{stderr}\n%{http_code}",
                                   "http://127.0.0.1:%d/10m" % args.origin], 60)
        code = err.rsplit("\n", 1)[-1]
        if rc == 0 and code == "200" and len(out) == BIG_SIZE and hashlib.sha256(out).hexdigest() == want:
            tally.good()
        else:
            tally.bad("curl exit %d, http %s, %d bytes%s" % (rc, code, len(out), (": " + err.split("\n")[0]) if rc else ""))
            pause(args, 0.5)


def cls_upload(args, tally):
    path = os.path.join(args.dir, "10m.bin")
    want = "%d %s" % (BIG_SIZE, hashlib.sha256(big_body(args.dir)).hexdigest())
    i = 0
    while running(args, i):
        i += 1
        rc, out, err = curl(args, ["--data-binary", "@" + path, "-H", "Content-Type: application/octet-stream",
                                   "-w", "\n%{http_code}", "http://127.0.0.1:%d/upload" % args.origin], 60)
        lines = out.decode(errors="replace").strip().split("\n")
        if rc == 0 and lines[-1] == "200" and lines[0] == want:
            tally.good()
        else:
            tally.bad("curl exit %d, answer %r%s" % (rc, lines[-2:], (": " + err) if rc else ""))
            pause(args, 0.5)


def check_lines(tally, rc, out, err, expect, want_size):
    """curl -w '%{http_code} %{size_download}\\n' per URL: every line must be '200 want_size'."""
    lines = out.decode(errors="replace").split()
    got = [(lines[k], lines[k + 1]) for k in range(0, len(lines) - 1, 2)]
    ok = sum(1 for c, s in got if c == "200" and int(s) == want_size)
    if ok:
        tally.good(ok)
    if ok < expect:
        bad = [g for g in got if g != ("200", str(want_size))]
        tally.bad("curl exit %d, %s%s" % (rc, bad[:1] or "missing answers", (": " + err) if rc else ""), expect - ok)


def cls_tunnel(args, tally):
    """Blind CONNECT tunnels (curl -p): alternately to the plain origin and to the HTTPS origin, whose certificate
    curl checks against the origin's own CA (so a tunnel that was intercepted by mistake fails)."""
    per = 10
    i = 0
    while running(args, i):
        i += 1
        if i % 2:
            urls = ["http://127.0.0.1:%d/small" % args.origin] * per
            extra = []
            tally.note("plain tunnels")
        else:
            urls = ["https://127.0.0.1:%d/small" % args.tls_origin] * per
            extra = ["--cacert", os.path.join(args.dir, "certs", "origin-ca.pem")]
            tally.note("tls tunnels")
        argv = ["-p"] + extra
        for u in urls:
            argv += ["-o", "/dev/null", "-w", "%{http_code} %{size_download}\n", u]
        rc, out, err = curl(args, argv, 30)
        check_lines(tally, rc, out, err, per, len(SMALL))
        if rc:
            pause(args, 0.5)


def cls_intercept(args, tally):
    """Intercepted tunnels: curl trusts only hookproxy's CA, so each answer proves hookproxy minted the leaf; the
    upstream leg to https://localhost is verified by hookproxy under the trust rule's ca_file."""
    ca = os.path.join(args.dir, "ca", "hookproxy-ca.pem")
    i = 0
    while running(args, i):
        i += 1
        argv = ["--cacert", ca]
        for _ in range(8):
            argv += ["-o", "/dev/null", "-w", "%{http_code} %{size_download}\n",
                     "https://localhost:%d/small" % args.tls_origin]
        rc, out, err = curl(args, argv, 30)
        check_lines(tally, rc, out, err, 8, len(SMALL))
        rc, out, err = curl(args, ["--cacert", ca, "-o", "/dev/null", "-w", "%{http_code} %{size_download}\n",
                                   "https://localhost:%d/256k" % args.tls_origin], 30)
        check_lines(tally, rc, out, err, 1, MID_SIZE)
        if rc:
            pause(args, 0.5)


def raw_connect():
    return socket.create_connection(("127.0.0.1", ARGS.proxy), timeout=10)


def close_hard(s, rst):
    if rst:     # SO_LINGER 0: the close sends RST instead of FIN
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


def cls_abandon(args, tally):
    """Clients that leave mid-body, in rotation. ok = the proxy had answered 200 and was streaming when the client
    left (or, for the upload, accepted the connection and the head); failed = a wrong or missing answer."""
    host = "127.0.0.1:%d" % args.origin
    ctx = ssl.create_default_context(cafile=os.path.join(args.dir, "ca", "hookproxy-ca.pem"))
    i = 0
    while running(args, i):
        i += 1
        kind = i % 4
        try:
            if kind == 0:       # curl gives up after 1 s on a slow 10 MiB download
                tally.note("curl --max-time 1 on /slow")
                rc, out, err = curl(args, ["-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                           "http://%s/slow" % host], 1)
                code, size = (out.decode().split() + ["", "0"])[:2]
                if rc == 28 and code == "200" and int(size) > 0:
                    tally.good()
                else:
                    tally.bad("curl --max-time 1: exit %d, http %s, %s bytes" % (rc, code, size))
            elif kind == 1:     # socket: GET 10 MiB, read ~8 KiB, close (FIN or RST)
                tally.note("socket reads 8 KiB of /10m then closes")
                s = raw_connect()
                s.sendall(b"GET http://%s/10m HTTP/1.1\r\nHost: %s\r\n\r\n" % (host.encode(), host.encode()))
                status, buf = read_status(s)
                while len(buf) < 8192:
                    d = s.recv(8192)
                    if not d:
                        break
                    buf += d
                close_hard(s, i % 8 == 1)
                if status == 200 and len(buf) >= 8192:
                    tally.good()
                else:
                    tally.bad("GET /10m: status %s after %d bytes" % (status, len(buf)))
            elif kind == 2:     # socket: POST 10 MiB, send 256 KiB of it, close
                tally.note("socket sends 256 KiB of a 10 MiB upload then closes")
                s = raw_connect()
                s.sendall(b"POST http://%s/upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
                          % (host.encode(), host.encode(), BIG_SIZE))
                s.sendall(b"\0" * 262144)
                close_hard(s, i % 8 == 2)
                tally.good()
            else:               # intercepted tunnel: GET /slow over TLS, read ~8 KiB, close
                tally.note("intercepted tunnel reads 8 KiB of /slow then closes")
                s = raw_connect()
                s.sendall(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (args.tls_origin, args.tls_origin))
                status, _ = read_status(s)
                if status != 200:
                    s.close()
                    tally.bad("CONNECT: status %s" % status)
                    continue
                t = ctx.wrap_socket(s, server_hostname="localhost")
                t.sendall(b"GET /slow HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % args.tls_origin)
                status, buf = read_status(t)
                while len(buf) < 8192:
                    d = t.recv(8192)
                    if not d:
                        break
                    buf += d
                close_hard(t, i % 8 == 3)
                if status == 200 and len(buf) >= 8192:
                    tally.good()
                else:
                    tally.bad("intercepted GET /slow: status %s after %d bytes" % (status, len(buf)))
        except Exception as e:  # noqa: BLE001
            tally.bad("%s: %s" % (type(e).__name__, e))
        pause(args, 0.1)


def cls_slowloris(args, tally):
    """args.conns sockets at a time, each dribbling one header line a second. Four in five never finish their head:
    ok = the proxy closed it between header-timeout - 1 s and header-timeout + 10 s; failed = closed earlier, still
    open later, or answered. One in five finishes its head after 5 lines (fewer when the header timeout is under
    10 s): ok = a 200 with the body."""
    ht = args.header_timeout
    lines = max(1, min(5, int(ht // 2)))     # a slow head that still beats the header timeout
    host = "127.0.0.1:%d" % args.origin
    slots = [None] * args.conns
    n = 0

    def opened(k):
        s = raw_connect()
        s.setblocking(False)
        s.send(b"GET http://%s/small HTTP/1.1\r\n" % host.encode())
        return {"s": s, "t0": time.time(), "sent": 0, "next": time.time() + 1, "finish": k % 5 == 0, "buf": b""}

    while time.time() < args.until:
        for k in range(len(slots)):
            c = slots[k]
            if c is None:
                if n >= args.max or time.time() >= args.until:
                    continue
                n += 1
                try:
                    slots[k] = opened(n)
                except Exception as e:  # noqa: BLE001
                    tally.bad("connect: %s" % e)
                    pause(args, 0.2)
                continue
            now = time.time()
            age = now - c["t0"]
            closed = False
            try:
                d = c["s"].recv(65536)
                if d:
                    c["buf"] += d
                else:
                    closed = True
            except (BlockingIOError, ssl.SSLWantReadError):
                pass
            except OSError:
                closed = True
            if c["finish"]:
                head_body = c["buf"].split(b"\r\n\r\n", 1)
                if len(head_body) == 2 and len(head_body[1]) >= len(SMALL):
                    if c["buf"].startswith(b"HTTP/1.1 200") and head_body[1][:len(SMALL)] == SMALL:
                        tally.good()
                        tally.note("slow heads served")
                    else:
                        tally.bad("slow head answered %r" % c["buf"][:40])
                    c["s"].close()
                    slots[k] = None
                    continue
                if closed or age > 20:
                    tally.bad("slow head: %s after %.1f s, got %r" % ("closed" if closed else "no answer", age, c["buf"][:40]))
                    c["s"].close()
                    slots[k] = None
                    continue
            else:
                if c["buf"]:
                    tally.bad("dribbling head answered after %.1f s: %r" % (age, c["buf"][:40]))
                    c["s"].close()
                    slots[k] = None
                    continue
                if closed:
                    if age < ht - 1:
                        tally.bad("closed early after %.1f s (header timeout %g s)" % (age, ht))
                    else:
                        tally.good()
                        tally.note("dribbling heads closed by the proxy")
                    c["s"].close()
                    slots[k] = None
                    continue
                if age > ht + 10:
                    tally.bad("still open after %.0f s (header timeout %g s)" % (age, ht))
                    c["s"].close()
                    slots[k] = None
                    continue
            if now >= c["next"] and not (c["finish"] and c["sent"] >= lines):
                c["sent"] += 1
                c["next"] = now + 1
                line = b"X-Slow-%d: %d\r\n" % (c["sent"], c["sent"])
                if c["finish"] and c["sent"] == lines:
                    line += b"Host: %s\r\n\r\n" % host.encode()
                try:
                    c["s"].send(line)
                except BlockingIOError:
                    pass
                except OSError:
                    pass    # the proxy closed it; the next recv says so
        time.sleep(0.05)
    for c in slots:
        if c is not None:
            c["s"].close()


def malformed_cases(origin):
    host = b"127.0.0.1:%d" % origin
    abs_ = b"http://" + host + b"/small"
    return [
        ("garbage request line", b"GARBAGE\r\n\r\n", 400),
        ("HTTP/9.9", b"GET " + abs_ + b" HTTP/9.9\r\nHost: " + host + b"\r\n\r\n", 400),
        ("HTTP/0.9 style", b"GET /\r\n\r\n", 400),
        ("NUL in target", b"GET " + abs_ + b"\0 HTTP/1.1\r\nHost: " + host + b"\r\n\r\n", 400),
        ("Content-Length: abc", b"POST " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: abc\r\n\r\n", 400),
        ("Content-Length: -5", b"POST " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: -5\r\n\r\n", 400),
        ("two Content-Lengths", b"POST " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400),
        ("Content-Length + chunked", b"POST " + abs_ + b" HTTP/1.1\r\nHost: " + host
         + b"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        ("bad chunk size", b"POST " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("header without colon", b"GET " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nNoColonHere\r\n\r\n", 400),
        ("space in header name", b"GET " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nBad Name: x\r\n\r\n", 400),
        ("bad URL", b"GET http://[::1 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("CONNECT without port", b"CONNECT nohostport HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("100 KB header value", b"GET " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n", 431),
        ("100 KB URL", b"GET http://" + host + b"/" + b"a" * 100000 + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n", 431),
        ("16000 headers (180 KB)", b"GET " + abs_ + b" HTTP/1.1\r\nHost: " + host + b"\r\n"
         + b"".join(b"X-H%d: v\r\n" % k for k in range(16000)) + b"\r\n", 431),
    ]


def cls_malformed(args, tally):
    """Malformed requests on fresh connections. ok = the expected status (400, or 431 for oversized heads) and the
    connection closed after it; failed = another status, no answer within 10 s, or the connection left open."""
    cases = malformed_cases(args.origin)
    i = 0
    while running(args, i):
        name, data, want = cases[i % len(cases)]
        i += 1
        try:
            s = raw_connect()
            try:
                s.sendall(data)
            except OSError:
                pass        # the proxy may answer and close before it has read all of an oversized head
            status, buf = read_status(s)
            closed = False
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        closed = True
                        break
            except socket.timeout:
                pass
            except OSError:
                closed = True
            s.close()
            if status == want and closed:
                tally.good()
            elif status == want:
                tally.bad("%s: %d but the connection stayed open" % (name, status))
            else:
                tally.bad("%s: expected %d, got %s" % (name, want, status if status else repr(buf[:60])))
        except Exception as e:  # noqa: BLE001
            tally.bad("%s: %s: %s" % (name, type(e).__name__, e))
        pause(args, 0.05)


CLASSES = {
    "keepalive": cls_keepalive, "newconn": cls_newconn, "download": cls_download, "upload": cls_upload,
    "tunnel": cls_tunnel, "intercept": cls_intercept, "abandon": cls_abandon, "slowloris": cls_slowloris,
    "malformed": cls_malformed,
}


# ------------------------------------------------------------------------------------------------------ report
DESCRIPTIONS = [
    ("keepalive", "keep-alive GET 1 KiB", "200 + exact body", "anything else"),
    ("newconn", "new connection per GET 1 KiB", "200 + exact body", "anything else"),
    ("download", "10 MiB download (curl)", "200 + SHA-256 match", "anything else"),
    ("upload", "10 MiB upload (curl)", "origin got all 10 MiB, SHA-256 match", "anything else"),
    ("tunnel", "blind CONNECT (curl -p), plain + TLS", "200 + body, origin cert", "anything else"),
    ("intercept", "intercepted CONNECT to https://localhost", "200 + body, hookproxy CA", "anything else"),
    ("abandon", "client leaves mid-body (4 kinds)", "proxy was streaming a 200", "no/wrong answer"),
    ("slowloris", "head dribbled 1 line/s", "closed at header timeout / slow head served", "closed early, kept open, wrong answer"),
    ("malformed", "malformed request", "400/431 + close", "other status, no answer, kept open"),
]


def run_report(args):
    d = args.dir
    samples = []
    with open(os.path.join(d, "samples.tsv")) as f:
        for line in f:
            t, rss, fds, thr = line.split()
            samples.append((int(t), int(rss), int(fds), int(thr)))
    final = dict(kv.split("=", 1) for kv in args.final)
    results = {}
    for name, *_ in DESCRIPTIONS:
        p = os.path.join(d, "results", name + ".json")
        results[name] = json.load(open(p)) if os.path.exists(p) else None

    out = []
    out.append("| class | what | ok means | failed means | ok | failed |")
    out.append("| --- | --- | --- | --- | ---: | ---: |")
    total_failed = 0
    for name, what, okm, badm in DESCRIPTIONS:
        r = results[name]
        if r is None:
            out.append("| %s | %s | %s | %s | – | – (no result) |" % (name, what, okm, badm))
            total_failed += 1
            continue
        total_failed += r["failed"]
        out.append("| %s | %s | %s | %s | %d | %d |" % (name, what, okm, badm, r["ok"], r["failed"]))

    warm = [s for s in samples if s[0] <= args.warmup]
    load = [s for s in samples if s[0] <= args.load_end]
    start, warm_s, last_load = samples[0], (warm[-1] if warm else samples[0]), (load[-1] if load else samples[-1])
    end = (0, int(final["rss"]), int(final["fds"]), int(final["threads"]))
    peak = max(s[1] for s in samples + [end])
    mib = lambda k: "%.1f" % (k / 1024)
    out.append("")
    out.append("| proxy | start | after warm-up (%d s) | end of load | end (settled) | peak |" % warm_s[0])
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    out.append("| RSS MiB | %s | %s | %s | %s | %s (sampled), %s (VmHWM) |" % (
        mib(start[1]), mib(warm_s[1]), mib(last_load[1]), mib(end[1]), mib(peak), mib(int(final["hwm"]))))
    out.append("| open fds | %d | %d | %d | %d | %d |" % (start[2], warm_s[2], last_load[2], end[2], max(s[2] for s in samples)))
    out.append("| threads | %d | %d | %d | %d | %d |" % (start[3], warm_s[3], last_load[3], end[3], max(s[3] for s in samples)))

    verdicts = []
    growth = (end[1] - warm_s[1]) / warm_s[1] if warm_s[1] else 0
    rss_ok = end[1] <= warm_s[1] * 1.10
    verdicts.append(("RSS end ≤ 1.10 × after warm-up", "%s → %s MiB (%+.1f%%)" % (mib(warm_s[1]), mib(end[1]), growth * 100), rss_ok))
    fd_ok = end[2] <= warm_s[2] + args.fd_slack
    verdicts.append(("fds end ≤ after warm-up + %d" % args.fd_slack, "%d vs %d" % (end[2], warm_s[2]), fd_ok))
    alive = final.get("alive") == "1"
    verdicts.append(("proxy alive through the run", "yes" if alive else "NO (died at %s)" % final.get("died", "?"), alive))
    clean = final.get("exit", "") == "0"
    verdicts.append(("SIGTERM at the end: exit 0", "exit %s" % final.get("exit", "?"), clean))
    verdicts.append(("failed requests (all classes)", str(total_failed), total_failed == 0))
    origin = {}
    for name in os.listdir(os.path.join(d, "results")):
        if name.startswith("origin-") and name.endswith(".json"):
            for k, v in json.load(open(os.path.join(d, "results", name))).items():
                origin[k] = origin.get(k, 0) + v
    slow_done = origin.get("slow completed", 0)
    verdicts.append(("abandoned /slow downloads cancelled upstream",
                     "%d cut short at the origin, %d ran to the end" % (origin.get("slow cut short", 0), slow_done),
                     slow_done == 0))
    out.append("")
    out.append("| check | measured | pass |")
    out.append("| --- | --- | :-: |")
    for desc, meas, ok in verdicts:
        out.append("| %s | %s | %s |" % (desc, meas, "yes" if ok else "**no**"))

    errs = []
    for name, *_ in DESCRIPTIONS:
        r = results[name]
        if r and r["errors"]:
            for msg, n in sorted(r["errors"].items(), key=lambda kv: -kv[1])[:5]:
                errs.append("- %s: %d × %s" % (name, n, msg))
    notes = []
    for name, *_ in DESCRIPTIONS:
        r = results[name]
        if r and r["notes"]:
            notes.append("- %s: %s" % (name, ", ".join("%s %d" % kv for kv in sorted(r["notes"].items()))))
    if origin:
        notes.append("- origins (what they saw): %s" % ", ".join("%s %d" % kv for kv in sorted(origin.items())))
    if notes:
        out.append("")
        out.append("Breakdown:")
        out.extend(notes)
    if errs:
        out.append("")
        out.append("Failures (up to 5 kinds per class):")
        out.extend(errs)
    print("\n".join(out))
    # The hard rules (exit status): RSS growth, fd leak, the proxy dying or not stopping cleanly. Failed requests
    # are reported; they fail the run too, since every class counts only what the proxy got wrong.
    sys.exit(0 if all(ok for _, _, ok in verdicts) else 1)


# ------------------------------------------------------------------------------------------------------ main
ARGS = None


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["origin", "report"] + sorted(CLASSES))
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int)
    ap.add_argument("--tls", nargs=2)
    ap.add_argument("--proxy", type=int)
    ap.add_argument("--origin", type=int)
    ap.add_argument("--tls-origin", type=int)
    ap.add_argument("--until", type=float, default=0)
    ap.add_argument("--max", type=int, default=10_000_000)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--header-timeout", type=float, default=30)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--load-end", type=int, default=0)
    ap.add_argument("--fd-slack", type=int, default=16)
    ap.add_argument("--final", nargs="*", default=[])
    args = ARGS = ap.parse_args()
    if args.what == "origin":
        return run_origin(args)
    if args.what == "report":
        return run_report(args)
    os.setpgid(0, 0)        # its own process group: soak.sh stops it together with any curl it runs
    tally = Tally(args, args.what)
    signal.signal(signal.SIGTERM, lambda *a: (tally.flush(True), os._exit(0)))
    tally.flush(True)
    try:
        CLASSES[args.what](args, tally)
    finally:
        tally.flush(True)


if __name__ == "__main__":
    main()
