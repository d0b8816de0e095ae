"""Starts .build/debug/hookproxy for the viewer's browser and API tests, and sends requests through it."""
import os
import http.client
import http.server
import json
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

RULES = """
rules:
  - name: mock-user
    match: {host: api.viewer.test, path: "/users/*"}
    respond:
      headers: {Content-Type: application/json}
      body: '{"name":"Ada Lovelace","roles":["admin","analyst"],"active":true,"id":1815}'
  - name: mock-missing
    match: {host: api.viewer.test, path: /missing}
    respond: {status: 404, body: "no such thing\\n"}
  - name: mock-logo
    match: {host: cdn.viewer.test}
    respond:
      headers: {Content-Type: image/svg+xml}
      body: '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><circle cx="20" cy="20" r="18" fill="#2f6fdf"/></svg>'
  - name: follow-redirects
    match: {host: 127.0.0.1, path: "/redirect*"}
    on_redirect: {action: follow, max_hops: 3}
  - name: accept-tls-origin
    match: {host: localhost, scheme: https, path: /trusted}
    trust: {allow_invalid_certificates: true, validate_domain_name: false}
  - name: pin-tls-origin
    match: {host: localhost, scheme: https}
    trust:
      pinning: public_key
      pins: ["sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
  - name: mock-down
    match: {host: api.viewer.test, path: /health}
    respond: {status: 503, body: "maintenance\\n"}
"""


class _OriginHandler(http.server.BaseHTTPRequestHandler):
    """/json: a JSON object; /redirect: 302 to /json; anything else: a short text."""

    def do_GET(self):
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/json"):
            body, kind = json.dumps({"order": 1042, "items": [{"sku": "tea", "qty": 2}], "paid": True}).encode(), "application/json"
        else:
            body, kind = b"hello from the origin\n", "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Origin:
    """A plain HTTP server on 127.0.0.1:0 in a thread, so exchanges have upstream timings."""

    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OriginHandler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class TLSOrigin:
    """An HTTPS server on localhost:0 with a self-signed certificate made now (openssl), for a trust decision."""

    def __init__(self, directory):
        cert, key = os.path.join(directory, "origin.pem"), os.path.join(directory, "origin.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OriginHandler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://localhost:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Hookproxy:
    """`hookproxy run --listen 127.0.0.1:0` with mock rules in a temporary directory; stopped with SIGTERM."""

    def __init__(self, binary, extra=()):
        self.dir = tempfile.TemporaryDirectory(prefix="hookproxy-viewer-")
        rules = os.path.join(self.dir.name, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES)
        self.process = subprocess.Popen(
            [binary, "run", "--listen", "127.0.0.1:0", "--rules", rules, "--ca-dir", os.path.join(self.dir.name, "ca"),
             "--quiet", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip()
        prefix = "hookproxy listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"hookproxy did not start: {line!r} {self.process.stderr.read()}")
        self.url = line[len(prefix):]
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": self.url}))
        self.origin = Origin()
        self.tls_origin = TLSOrigin(self.dir.name)

    def through(self, url):
        """GETs `url` through the proxy; returns the status."""
        try:
            with self.opener.open(url, timeout=20) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def absolute(self, url):
        """Sends `GET url` (an https URL too) to the proxy in absolute form: hookproxy fetches it itself, so its
        trust rules apply (a CONNECT would be a blind tunnel). Returns the status."""
        host, port = self.url.rsplit("//", 1)[1].split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=20)
        try:
            connection.request("GET", url)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def stop(self):
        if getattr(self, "origin", None):
            self.origin.stop()
            self.origin = None
        if getattr(self, "tls_origin", None):
            self.tls_origin.stop()
            self.tls_origin = None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.dir.cleanup()
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def wait_until(condition, timeout=20, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
