#!/usr/bin/env bash
# Profiles hookproxy (release) under wrk keep-alive 1 KiB, 64 connections, through an nginx upstream on loopback.
#
#   bash bench/profile.sh [extra hookproxy args…]     e.g. --har /tmp/x.har, --rules DIR
#
# Prints: perf stat (instructions, cycles, context switches, syscalls) per request, then the top symbols of a
# perf record (self and children). Needs perf (linux-perf); run bench/run.sh once first for nginx and wrk.
# BENCH_DURATION (default 8) seconds of load; BENCH_KEEP=1 keeps perf.data and logs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DUR=${BENCH_DURATION:-8}
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
PATH="$PATH:/usr/sbin:/sbin"
HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")

T=$(mktemp -d /tmp/hookproxy-profile.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

mkdir -p "$T/www" "$T/nginx" "$T/rules"
head -c 1024 /dev/urandom >"$T/www/1k.bin"; chmod -R a+rX "$T/www"
NP=$(free_port); HP=$(free_port)
cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $T/nginx/nginx.pid; error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 10000000; client_body_temp_path $T/nginx/body; proxy_temp_path $T/nginx/proxy;
  fastcgi_temp_path $T/nginx/fastcgi; uwsgi_temp_path $T/nginx/uwsgi; scgi_temp_path $T/nginx/scgi;
  server { listen 127.0.0.1:$NP; root $T/www; } }
EOF
nginx -p "$T/nginx" -c "$T/nginx/nginx.conf" & PIDS+=($!)
(cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$HP" --quiet --rules "$T/rules" "$@") >"$T/hookproxy.log" 2>&1 &
HPID=$!; PIDS+=("$HPID")
for _ in $(seq 1 100); do curl -sf -o /dev/null -x "http://127.0.0.1:$HP" "http://127.0.0.1:$NP/1k.bin" && break; sleep 0.1; done
cat >"$T/bench.lua" <<EOF
wrk.path = "http://127.0.0.1:$NP/1k.bin"
wrk.headers["Host"] = "127.0.0.1:$NP"
done = function(s) io.write(string.format("RESULT %d %d\n", s.requests, s.duration)) end
EOF
run_wrk() { wrk -t2 -c64 -d"${1}s" -s "$T/bench.lua" "http://127.0.0.1:$HP" | grep '^RESULT'; }
run_wrk 2 >/dev/null   # warm-up

events="instructions,cycles,task-clock,context-switches,cpu-migrations"
perf list 2>/dev/null | grep -q 'raw_syscalls:sys_enter' && events="$events,raw_syscalls:sys_enter"
perf stat -e "$events" -p "$HPID" -o "$T/stat.txt" -- sleep "$DUR" & SP=$!
res=$(run_wrk "$DUR"); wait $SP || true
reqs=$(awk '{print $2}' <<<"$res")
echo "== perf stat of hookproxy, $reqs requests in ${DUR}s ($(awk -v r="$reqs" -v d="$DUR" 'BEGIN{printf "%.0f", r/d}') req/s)"
awk -v r="$reqs" '$1 ~ /^[0-9,.]+$/ { gsub(",", "", $1); printf "  %-28s %16.0f   %10.2f per request\n", $2, $1, $1 / r }' "$T/stat.txt"

perf record -F 999 -g -p "$HPID" -o "$T/perf.data" -- sleep "$DUR" >/dev/null 2>&1 & RP=$!
run_wrk "$DUR" >/dev/null; wait $RP || true
echo "== top symbols, self (perf record -g, ${DUR}s)"
perf report -i "$T/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -E "^ +[0-9]" | sed -E "s/ +-? +-? *$//" | cut -c1-160 | head -40
echo "== top symbols, with children"
perf report -i "$T/perf.data" --children --sort symbol --stdio -g none 2>/dev/null | grep -E "^ +[0-9]" | sed -E "s/ +-? +-? *$//" | cut -c1-160 | head -40
echo "== by thread"
perf report -i "$T/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head
