"""schemathesis against the viewer's /api/openapi.json on a running hookproxy: no request may get a 5xx.

usage: viewer_api_schemathesis.py HOOKPROXY_BINARY SCHEMATHESIS_BINARY
"""
import os
import subprocess
import sys

from hookproxy_process import Hookproxy


def main(binary, schemathesis):
    with Hookproxy(binary) as proxy:
        for path in ["/users/1", "/missing", "/health"]:
            proxy.through(f"http://api.viewer.test{path}")
        result = subprocess.run(
            [os.path.abspath(schemathesis), "run", proxy.url + "/api/openapi.json", "--checks", "not_a_server_error",
             "--exclude-path", "/api/events",
             # POST needs the viewer's own Origin; with it, /api/clear is exercised too
             "--header", f"Origin: {proxy.url}", "--max-examples", "40", "--request-timeout", "10"],
            timeout=600, cwd=proxy.dir.name)  # its caches (.schemathesis, .hypothesis) stay out of the repository
        if result.returncode != 0:
            sys.exit(f"schemathesis found server errors (exit {result.returncode})")
    print("viewer API schemathesis: no server errors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
