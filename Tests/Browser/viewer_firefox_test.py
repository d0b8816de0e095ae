"""The traffic viewer in a real headless Firefox (Debian's firefox-esr), driven over WebDriver BiDi, the protocol
Firefox speaks itself (no geckodriver: Debian does not package it and this machine cannot download it): the page
loads without console errors, a new exchange appears live, the filter narrows the list, and a row opens with a
pretty-printed JSON body. The BiDi client is a few lines on the `websockets` package.

usage: viewer_firefox_test.py HOOKPROXY_BINARY [FIREFOX]
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from websockets.sync.client import connect

from hookproxy_process import Hookproxy, wait_until


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Firefox:
    """A headless Firefox with a throwaway profile, and one BiDi session to it."""

    def __init__(self, binary):
        self.profile = tempfile.TemporaryDirectory(prefix="hookproxy-firefox-")
        with open(os.path.join(self.profile.name, "user.js"), "w") as prefs:
            prefs.write('user_pref("network.proxy.type", 0);\n')  # no proxy: the page talks to hookproxy itself
            prefs.write('user_pref("browser.shell.checkDefaultBrowser", false);\n')
        port = free_port()
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-remote", "--profile", self.profile.name, f"--remote-debugging-port={port}",
             "--width=1500", "--height=860", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.socket = wait_until(lambda: self._connect(port), timeout=60, what="Firefox's WebDriver BiDi endpoint")
        self.next_id = 0
        self.events = []
        self.command("session.new", {"capabilities": {}})
        self.command("session.subscribe", {"events": ["log.entryAdded"]})
        self.context = self.command("browsingContext.getTree", {})["contexts"][0]["context"]

    @staticmethod
    def _connect(port):
        try:
            return connect(f"ws://127.0.0.1:{port}/session", open_timeout=5, max_size=None).__enter__()
        except OSError:
            return None

    def command(self, method, params, timeout=30):
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("type") == "event":
                self.events.append(message)
            elif message.get("id") == ident:
                if message.get("type") == "error":
                    raise RuntimeError(f"{method}: {message.get('error')}: {message.get('message')}")
                return message["result"]

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (a promise is awaited), as JSON-ish Python."""
        result = self.command("script.evaluate", {
            "expression": f"JSON.stringify(({expression}))", "awaitPromise": True,
            "target": {"context": self.context}})
        if result.get("type") == "exception":
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        value = result["result"].get("value")
        return None if value is None else json.loads(value)

    def errors(self):
        """Console errors and uncaught exceptions so far."""
        self.command("browsingContext.getTree", {})  # drains events sent meanwhile
        return [e["params"] for e in self.events
                if e.get("method") == "log.entryAdded" and e["params"].get("level") == "error"]

    def close(self):
        try:
            self.command("session.end", {}, timeout=10)
        except Exception:
            pass
        try:
            self.socket.close()
        except Exception:
            pass
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.profile.cleanup()


PATHS = "[...document.querySelectorAll('#rows .row.flow .c-path')].map(e => e.textContent)"


def main(binary, firefox):
    with Hookproxy(binary) as proxy:
        for path in ["/users/1", "/missing", "/health"]:
            proxy.through(f"http://api.viewer.test{path}")
        browser = Firefox(firefox)
        try:
            browser.command("browsingContext.navigate", {"context": browser.context, "url": proxy.url + "/",
                                                         "wait": "complete"})
            assert browser.evaluate("document.title").startswith("hookproxy"), browser.evaluate("document.title")
            wait_until(lambda: len(browser.evaluate(PATHS)) == 3, what="the three earlier exchanges in the list")

            # a new exchange appears live (server-sent events)
            assert proxy.through("http://api.viewer.test/users/42?live=1") == 200
            wait_until(lambda: "/users/42?live=1" in browser.evaluate(PATHS), what="the new exchange in the list")

            # the filter narrows the list (typed as a user would: the input event)
            browser.evaluate("(() => { const box = document.getElementById('filter'); box.value = 'status:4xx';"
                             " box.dispatchEvent(new Event('input', {bubbles: true})); return true; })()")
            wait_until(lambda: browser.evaluate(PATHS) == ["/missing"], what="status:4xx to leave only /missing")
            browser.evaluate("(() => { const box = document.getElementById('filter'); box.value = '';"
                             " box.dispatchEvent(new Event('input', {bubbles: true})); return true; })()")
            wait_until(lambda: len(browser.evaluate(PATHS)) == 4, what="the whole list again")

            # a row opens with a pretty-printed JSON body
            browser.evaluate("[...document.querySelectorAll('#rows .row.flow')]"
                             ".find(r => r.querySelector('.c-path').textContent === '/users/42?live=1').click() || true")
            body = wait_until(lambda: browser.evaluate(
                "[...document.querySelectorAll('#detail pre.json')].map(e => e.textContent)"
                ".find(t => t.includes('\\n  \"name\": \"Ada Lovelace\"')) || null"), what="the pretty-printed JSON body")
            assert '"roles": [\n    "admin"' in body, body

            errors = browser.errors()
            assert not errors, f"console errors: {errors}"
        finally:
            browser.close()
    print("viewer Firefox test: passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/firefox-esr")
