#!/usr/bin/env bash
# HTTP/2 case of the hookproxy benchmark: h2load through an intercepted tunnel, hookproxy vs mitmdump, one run.
#
#   bash bench/h2.sh                    (make bench runs it after bench/run.sh)
#
# h2load speaks no proxy protocol, so socat stands between: each h2load connection becomes one CONNECT to the proxy
# under test (`PROXY:` address), and h2load then does TLS and HTTP/2 inside the tunnel, which the proxy intercepts.
# The origin is nginx with TLS and HTTP/2 on 127.0.0.1 (a certificate made here; the proxies are told to trust it).
# Cases: 64 concurrent streams (h2load -m 64) of 1 KiB GETs, over 1 and over 10 client connections.
#
# Environment knobs (all optional):
#   BENCH_H2_REQUESTS=20000   requests per case
#   BENCH_H2_PROXIES="hookproxy mitmdump"
#   BENCH_HOOKPROXY=PATH      use this hookproxy binary instead of building the release one
#   BENCH_KEEP=1              keep the temp dir
# The table goes to stdout and to bench/results/h2-latest.md. Target (issue 16): hookproxy ≥ 10× mitmdump's req/s.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REQUESTS=${BENCH_H2_REQUESTS:-20000}
PROXIES=${BENCH_H2_PROXIES:-"hookproxy mitmdump"}
SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

need_pkgs=""
command -v h2load >/dev/null 2>&1 || need_pkgs="$need_pkgs nghttp2-client"
command -v socat >/dev/null 2>&1 || need_pkgs="$need_pkgs socat"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_pkgs="$need_pkgs nginx-light"
command -v openssl >/dev/null 2>&1 || need_pkgs="$need_pkgs openssl"
if [ -n "$need_pkgs" ]; then
  say "installing:$need_pkgs"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_pkgs >/dev/null
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then $SUDO systemctl stop nginx || true; fi
fi
PATH="$PATH:/usr/sbin:/sbin"

VENV="$ROOT/.build/benchvenv"
MITMDUMP=""
if [ -x "$VENV/bin/mitmdump" ]; then
  MITMDUMP="$VENV/bin/mitmdump"
elif [[ " $PROXIES " == *" mitmdump "* ]]; then
  say "installing mitmproxy into $VENV"
  mkdir -p "$ROOT/.build"
  if python3 -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/pip" install -q --disable-pip-version-check mitmproxy >/dev/null 2>&1; then
    MITMDUMP="$VENV/bin/mitmdump"
  else
    echo "note: mitmproxy could not be installed; mitmdump is skipped" >&2
  fi
fi

if [ -n "${BENCH_HOOKPROXY:-}" ]; then
  HOOKPROXY=$BENCH_HOOKPROXY
else
  say "building hookproxy (release)"
  HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")
fi

T=$(mktemp -d /tmp/hookproxy-bench-h2.XXXXXX)
chmod 755 "$T"
PIDS=()
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# ------------------------------------------------------------------------------------------ origin: nginx, TLS, h2
say "origin: nginx with TLS and HTTP/2 in $T"
mkdir -p "$T/www" "$T/nginx"
head -c 1024 /dev/urandom >"$T/www/1k.bin"
chmod -R a+rX "$T/www"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$T/origin.key" -out "$T/origin.pem" 2>/dev/null
ORIGIN_PORT=$(free_port)
cat >"$T/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  http2_max_requests 10000000;
  client_body_temp_path $T/nginx/body;
  proxy_temp_path $T/nginx/proxy;
  fastcgi_temp_path $T/nginx/fastcgi;
  uwsgi_temp_path $T/nginx/uwsgi;
  scgi_temp_path $T/nginx/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$ORIGIN_PORT ssl http2;
    ssl_certificate $T/origin.pem;
    ssl_certificate_key $T/origin.key;
    root $T/www;
  }
}
CONF
nginx -p "$T/nginx" -c "$T/nginx/nginx.conf" >"$T/nginx/stdout.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 50); do curl -sfk -o /dev/null "https://127.0.0.1:$ORIGIN_PORT/1k.bin" && break; sleep 0.1; done
curl -sfk --http2 -o /dev/null "https://127.0.0.1:$ORIGIN_PORT/1k.bin" || { cat "$T/nginx/error.log" >&2; echo "nginx did not start" >&2; exit 1; }

# hookproxy trusts the origin through a rule (its certificate is its own anchor).
mkdir -p "$T/rules"
cat >"$T/rules/trust.yaml" <<YAML
rules:
  - name: bench-origin
    match: { host: localhost }
    trust: { ca_file: "$T/origin.pem" }
YAML

PROXY_PID=""; PROXY_PORT=""
start_proxy() { # NAME
  local name=$1 port; port=$(free_port); PROXY_PORT=$port
  case $name in
    hookproxy) (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules" \
                 --intercept localhost --ca-dir "$T/ca") >"$T/$name.log" 2>&1 & ;;
    mitmdump)  mkdir -p "$T/mitm"; "$MITMDUMP" -q --listen-host 127.0.0.1 -p "$port" --set confdir="$T/mitm" \
                 --set ssl_insecure=true >"$T/$name.log" 2>&1 & ;;
  esac
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  for i in $(seq 1 300); do
    if curl -sfk -o /dev/null --max-time 2 -x "http://127.0.0.1:$port" "https://localhost:$ORIGIN_PORT/1k.bin"; then return 0; fi
    kill -0 "$PROXY_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "$name did not start; its log:" >&2; tail -20 "$T/$name.log" >&2
  return 1
}

declare -A R
# h2_case PROXY CONNECTIONS: socat turns each of h2load's connections into a CONNECT through the proxy.
h2_case() {
  local proxy=$1 conns=$2 shim out rps
  shim=$(free_port)
  socat "TCP-LISTEN:$shim,bind=127.0.0.1,fork,reuseaddr" \
    "PROXY:127.0.0.1:localhost:$ORIGIN_PORT,proxyport=$PROXY_PORT" 2>"$T/socat.log" &
  local socat_pid=$!
  PIDS+=("$socat_pid")
  sleep 0.3
  # h2load verifies no certificate; SNI comes from the URI (localhost). Its :authority would name socat's port, and
  # hookproxy fetches what an intercepted request's authority names (mitmdump the CONNECT target): name the origin.
  out=$(timeout 300 h2load -n "$REQUESTS" -c "$conns" -m 64 -H ":authority: localhost:$ORIGIN_PORT" \
    "https://localhost:$shim/1k.bin" 2>&1) || true
  stop_pid "$socat_pid"
  rps=$(awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($i ~ /req\/s/) { v = $(i - 1); gsub(",", "", v); print v } }' <<<"$out")
  local ok; ok=$(awk '/^requests:/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^succeeded/) print $i }' <<<"$out")
  R["c$conns|$proxy"]=${rps:-0}
  printf '   %-10s h2 1 KiB m64 c%-3s %10s req/s  (%s of %s succeeded)\n' "$proxy" "$conns" "${rps:-?}" "${ok:-?}" "$REQUESTS" >&2
  [ "${ok:-0}" = "$REQUESTS" ] || R["errors|$proxy"]="c$conns: ${ok:-0} of $REQUESTS succeeded"
}

for p in $PROXIES; do
  if [ "$p" = mitmdump ] && [ -z "$MITMDUMP" ]; then echo "   mitmdump: skipped (not installed)" >&2; continue; fi
  say "$p"
  start_proxy "$p" || continue
  h2_case "$p" 1
  h2_case "$p" 10
  stop_pid "$PROXY_PID"
done

MD="$ROOT/bench/results/h2-latest.md"
mkdir -p "$ROOT/bench/results"
{
  echo "hookproxy h2 bench, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $REQUESTS requests per case"
  echo
  echo "| h2load through an intercepted tunnel, 64 streams, 1 KiB GETs | hookproxy req/s | mitmdump req/s | ratio | target ≥ 10× |"
  echo "| --- | ---: | ---: | ---: | :-: |"
  for c in 1 10; do
    h=${R["c$c|hookproxy"]:-}; m=${R["c$c|mitmdump"]:-}
    ratio=$(awk -v a="$h" -v b="$m" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "–"; else printf "%.3g×", a / b }')
    met=$(awk -v a="$h" -v b="$m" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "n/a"; else print (a >= 10 * b ? "yes" : "**no**") }')
    echo "| $c client connection$([ "$c" = 1 ] || echo s) | ${h:-–} | ${m:-–} | $ratio | $met |"
  done
  for k in "${!R[@]}"; do [[ $k == errors\|* ]] && echo "- errors (${k#errors|}): ${R[$k]}"; done
  true
} | tee "$MD"
