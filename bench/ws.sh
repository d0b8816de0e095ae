#!/usr/bin/env bash
# WebSocket bench (issue 15): 1 KiB echo round trips per second with 1 and 32 sessions, for the server directly,
# through hookproxy and through mitmdump, in one run. Both proxies run as reverse proxies in front of the echo server
# (`--reverse` / `--mode reverse:`), so each one parses and relays every frame (a forward proxy would see wss only
# as a blind tunnel). Client and server are Python's `websockets`, in their own processes; one client process per
# figure drives all its sessions, so the client is part of what is measured: compare the ratios, in one run.
#
#   bash bench/ws.sh           (BENCH_WS_SECONDS=8, BENCH_HOOKPROXY=path, BENCH_PROXIES to drop mitmdump)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SECONDS_PER=${BENCH_WS_SECONDS:-8}
VENV="$ROOT/.build/benchvenv"
mkdir -p "$ROOT/.build"
if [ ! -x "$VENV/bin/python3" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python3" -c 'import websockets' 2>/dev/null || "$VENV/bin/pip" install -q --disable-pip-version-check websockets==17.4
PY="$VENV/bin/python3"
MITMDUMP="$VENV/bin/mitmdump"
[ -x "$MITMDUMP" ] || MITMDUMP=""
if [ -n "${BENCH_HOOKPROXY:-}" ]; then HOOKPROXY=$BENCH_HOOKPROXY; else
  swift build -c release --product hookproxy >&2
  HOOKPROXY="$(swift build -c release --show-bin-path)/hookproxy"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

WS_PORT=$(free_port)
"$PY" bench/ws_bench.py server "$WS_PORT" & PIDS+=($!)
wait_port "$WS_PORT"
HP_PORT=$(free_port)
"$HOOKPROXY" run --listen 127.0.0.1:0 --quiet --reverse "127.0.0.1:$HP_PORT=http://127.0.0.1:$WS_PORT" >/dev/null 2>&1 & PIDS+=($!)
wait_port "$HP_PORT"
declare -A TARGETS=([direct]="ws://127.0.0.1:$WS_PORT/" [hookproxy]="ws://127.0.0.1:$HP_PORT/")
ORDER="direct hookproxy"
if [ -n "$MITMDUMP" ]; then
  MP_PORT=$(free_port)
  "$MITMDUMP" -q --mode "reverse:http://127.0.0.1:$WS_PORT" --listen-host 127.0.0.1 -p "$MP_PORT" >/dev/null 2>&1 & PIDS+=($!)
  wait_port "$MP_PORT" && { TARGETS[mitmdump]="ws://127.0.0.1:$MP_PORT/"; ORDER="$ORDER mitmdump"; }
fi
declare -A R
for sessions in 1 32; do
  for who in $ORDER; do
    R["$who|$sessions"]=$("$PY" bench/ws_bench.py client "${TARGETS[$who]}" "$sessions" "$SECONDS_PER")
  done
done
echo "| WebSocket 1 KiB echo, round trips/s | 1 session | 32 sessions |"
echo "| --- | ---: | ---: |"
for who in $ORDER; do echo "| $who | ${R[$who|1]} | ${R[$who|32]} |"; done
for sessions in 1 32; do
  d=${R[direct|$sessions]}; h=${R[hookproxy|$sessions]}
  echo "hookproxy / direct at $sessions: $(awk -v a="$h" -v b="$d" 'BEGIN{printf "%.2f", a/b}') (target ≥ 0.4)"
  if [ -n "${R[mitmdump|$sessions]:-}" ]; then
    echo "hookproxy / mitmdump at $sessions: $(awk -v a="$h" -v b="${R[mitmdump|$sessions]}" 'BEGIN{printf "%.2f", a/b}') (target ≥ 10)"
  fi
done
