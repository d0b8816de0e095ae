#!/usr/bin/env bash
# The 50-rule set of the "hookproxy+rules" benchmark case, as YAML on stdout:
#
#   bash bench/rules50.sh NGINX_PORT >DIR/bench.yaml
#
# 47 rules that never match the benchmark URL (host globs, a path regex, method lists: the matcher still has to try
# them) and three that do match http://127.0.0.1:NGINX_PORT/*.bin (header edits both ways). Shared by bench/run.sh
# and bench/callgrind.sh.
set -euo pipefail
NGINX_PORT=${1:?usage: rules50.sh NGINX_PORT}
echo "rules:"
for i in $(seq 1 47); do
  case $((i % 4)) in
    0) printf '  - name: api-%d\n    match:\n      host: api%d.example.test\n      path: "/v%d/*"\n    request:\n      set_headers: { X-Env: staging%d }\n' "$i" "$i" "$i" "$i" ;;
    1) printf '  - name: strip-%d\n    match:\n      host: "*.svc%d.example.test"\n    response:\n      remove_headers: [Set-Cookie, X-Trace-%d]\n' "$i" "$i" "$i" ;;
    2) printf '  - name: mock-%d\n    match:\n      host: mock%d.example.test\n      method: [POST, PUT]\n    respond:\n      status: 201\n      body: "{\\"id\\": %d}"\n' "$i" "$i" "$i" ;;
    3) printf '  - name: regex-%d\n    match:\n      host: [cdn%d.example.test, static%d.example.test]\n      path_regex: "^/assets/([a-z]+)/%d/.*\\\\.js$"\n    response:\n      set_headers: { Cache-Control: no-store }\n' "$i" "$i" "$i" "$i" ;;
  esac
done
# Three that match the benchmark URL: header edits both ways.
printf '  - name: bench-request-headers\n    match:\n      host: 127.0.0.1\n      path: "/*.bin"\n    request:\n      set_headers: { X-Debug: "1", X-Requested-By: hookproxy }\n      remove_headers: [Cookie]\n'
printf '  - name: bench-response-headers\n    match:\n      host: 127.0.0.1\n      method: GET\n    response:\n      set_headers: { X-Served-Through: hookproxy }\n      remove_headers: [Set-Cookie]\n'
printf '  - name: bench-port\n    match:\n      port: %d\n    response:\n      set_headers: { X-Bench: "yes" }\n' "$NGINX_PORT"
