#!/usr/bin/env python3
"""A TLS 1.2 server that renegotiates on a connection hookproxy reused, with `--verify-time` and no trust rule.

    renegotiation.py HOOKPROXY DIR

DIR holds ca.pem (the anchor curl must trust: the caller bind-mounts it over the system bundle, in a private mount
namespace), leaf.pem, chain.pem and leaf.key (the server's, for 127.0.0.1). `openssl s_server` answers GET /one; the
proxy keeps the connection; GET /two goes out on it, and the server asks to renegotiate (HelloRequest) before it
answers. The OpenSSL verify callback hookproxy installs for `--verify-time` has the first transfer as its context,
freed by then: hookproxy must refuse the renegotiation (the server logs "no renegotiation"). Prints one JSON object.
127.0.0.1 only; both processes are stopped on exit.
"""
import json, os, select, socket, subprocess, sys, time

binary, d = sys.argv[1], sys.argv[2]
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
server = subprocess.Popen(["openssl", "s_server", "-tls1_2", "-accept", f"127.0.0.1:{port}", "-cert", f"{d}/leaf.pem",
                           "-cert_chain", f"{d}/chain.pem", "-key", f"{d}/leaf.key", "-no_ticket", "-no_cache"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
os.set_blocking(server.stdout.fileno(), False)
seen = b""


def wait_for(token, timeout=15):
    global seen
    end = time.time() + timeout
    while token not in seen and time.time() < end:
        select.select([server.stdout], [], [], 0.2)
        chunk = server.stdout.read()
        if chunk:
            seen += chunk
    return token in seen


def say(data):
    server.stdin.write(data)
    server.stdin.flush()


# s_server prints ACCEPT once it listens: a request sent before that is refused (seen under load: 502).
server_ready = wait_for(b"ACCEPT")
proxy = subprocess.Popen([binary, "run", "--listen", "127.0.0.1:0", "--quiet", "--no-ui",
                          "--verify-time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, SWIFT_BACKTRACE="enable=no"))
out = {"server_ready": server_ready}
try:
    proxy_port = int(proxy.stdout.readline().decode().rsplit(":", 1)[1].strip().strip("/"))
    client = socket.create_connection(("127.0.0.1", proxy_port), timeout=15)
    request = lambda path: f"GET https://127.0.0.1:{port}/{path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    client.sendall(request("one"))
    out["first_request_seen"] = wait_for(b"GET /one")
    say(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none")
    out["first_response"] = client.recv(4096).decode("latin-1").split("\r\n")[0]
    time.sleep(0.5)  # the first transfer ends and is freed; curl keeps its connection
    client.sendall(request("two"))
    out["second_request_seen"] = wait_for(b"GET /two")
    say(b"r\n")  # s_server: send a HelloRequest
    wait_for(b"SSL_do_handshake", timeout=5)
    say(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo")
    try:
        out["second_response"] = client.recv(4096).decode("latin-1").split("\r\n")[0]
    except OSError as error:
        out["second_response"] = repr(error)
    wait_for(b"no renegotiation", timeout=5)
    time.sleep(0.5)
    out["renegotiation_refused"] = b"no renegotiation" in seen
    out["proxy_alive"] = proxy.poll() is None
finally:
    for process in (proxy, server):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    out["proxy_stderr"] = proxy.stderr.read().decode(errors="replace")[-500:]
    out["server_log"] = seen.decode(errors="replace")[-500:]
print(json.dumps(out))
