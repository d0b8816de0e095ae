#!/usr/bin/env bash
# WebSocket bench (issue 15): 1 KiB echo round trips per second with 1 and 32 sessions, for the server directly,
# through hookproxy and through mitmdump, in one run. Both proxies run as reverse proxies in front of the echo server
# (`--reverse` / `--mode reverse:`), so each one parses and relays every frame (a forward proxy would see wss only
# as a blind tunnel). Two pairs of peers, each in its own processes: Python's `websockets` (an independent
# implementation, but it tops out near 6,000 round trips/s per process, so it caps every figure), and
# bench/ws_peer.c (C, blocking sockets, a thread per session; built here with cc), which leaves the proxies as
# what is measured. The client is part of every figure: compare the ratios, in one run.
#
#   bash bench/ws.sh           (BENCH_WS_SECONDS=8, BENCH_HOOKPROXY=path)
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
  HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

PEER="$ROOT/.build/ws_peer"
cc -O2 -pthread -o "$PEER" bench/ws_peer.c

# For each pair of peers: its echo server, and hookproxy and mitmdump as reverse proxies in front of it.
declare -A TARGETS PROCS
for peers in python c; do
  port=$(free_port)
  if [ "$peers" = python ]; then "$PY" bench/ws_bench.py server "$port" & PIDS+=($!); else "$PEER" server "$port" & PIDS+=($!); fi
  PROCS["$peers|server"]=$!
  wait_port "$port"
  TARGETS["$peers|direct"]="127.0.0.1:$port"
  hp=$(free_port)
  "$HOOKPROXY" run --listen 127.0.0.1:0 --quiet --reverse "127.0.0.1:$hp=http://127.0.0.1:$port" >/dev/null 2>&1 & PIDS+=($!)
  PROCS["$peers|hookproxy"]=$!
  wait_port "$hp"
  TARGETS["$peers|hookproxy"]="127.0.0.1:$hp"
  if [ -n "$MITMDUMP" ]; then
    mp=$(free_port)
    "$MITMDUMP" -q --mode "reverse:http://127.0.0.1:$port" --listen-host 127.0.0.1 -p "$mp" >/dev/null 2>&1 & PIDS+=($!)
    PROCS["$peers|mitmdump"]=$!
    wait_port "$mp" && TARGETS["$peers|mitmdump"]="127.0.0.1:$mp"
  fi
done
# CPU time per round trip, by process, of the C peers' 32-session runs (what the ratios to direct come from: the
# proxy's user and system time, the server's, the client's), from /proc/PID/stat and the shell's `times`.
CPU=$(mktemp)
trap 'cleanup; rm -f "$CPU" "$CPU.before" "$CPU.after"' EXIT
TICK=$(getconf CLK_TCK)
ticks() { [ -n "$1" ] && awk '{print $14, $15}' "/proc/$1/stat" || echo "0 0"; }
ORDER="direct hookproxy"
[ -n "${TARGETS[python|mitmdump]:-}" ] && ORDER="$ORDER mitmdump"
sleep 2  # mitmdump finishes loading after it listens

run() {  # PEERS WHO SESSIONS → round trips per second
  local address=${TARGETS["$1|$2"]}
  if [ "$1" = python ]; then "$PY" bench/ws_bench.py client "ws://$address/" "$3" "$SECONDS_PER"
  elif [ "$3" = 32 ]; then
    local proxy=${PROCS["c|$2"]:-} server=${PROCS["c|server"]} rt
    read -r su0 ss0 < <(ticks "$server"); read -r pu0 ps0 < <(ticks "$proxy")
    times > "$CPU.before"
    rt=$("$PEER" client "${address%:*}" "${address#*:}" / "$3" "$SECONDS_PER" 1024)
    times > "$CPU.after"
    read -r su1 ss1 < <(ticks "$server"); read -r pu1 ps1 < <(ticks "$proxy")
    # `times`' second line: the user and system time of this shell's children (the client), as 0m1.234s.
    read -r cu cs < <(cat "$CPU.before" "$CPU.after" | awk 'NR % 2 == 0 { for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); v[NR, i] = t[1] * 60 + t[2] } }
      END { printf "%.3f %.3f\n", v[4, 1] - v[2, 1], v[4, 2] - v[2, 2] }')
    echo "$2 $rt $((pu1 - pu0)) $((ps1 - ps0)) $((su1 - su0)) $((ss1 - ss0)) $cu $cs" >> "$CPU"
    echo "$rt"
  else "$PEER" client "${address%:*}" "${address#*:}" / "$3" "$SECONDS_PER" 1024; fi
}
declare -A R
for peers in python c; do
  for sessions in 1 32; do
    for who in $ORDER; do R["$peers|$who|$sessions"]=$(run "$peers" "$who" "$sessions"); done
  done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
echo "| WebSocket 1 KiB echo, round trips/s | peers | 1 session | 32 sessions |"
echo "| --- | --- | ---: | ---: |"
for peers in python c; do
  for who in $ORDER; do echo "| $who | $peers | ${R[$peers|$who|1]} | ${R[$peers|$who|32]} |"; done
done
echo
echo "CPU per round trip at 32 sessions, C peers (µs; each run's round trips/s × $SECONDS_PER s):"
echo "| path | proxy user | proxy system | server | client | all |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
awk -v tick="$TICK" -v secs="$SECONDS_PER" '{
  n = $2 * secs; if (n == 0) next
  pu = $3 / tick * 1e6 / n; ps = $4 / tick * 1e6 / n; sv = ($5 + $6) / tick * 1e6 / n; cl = ($7 + $8) * 1e6 / n
  printf "| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", $1, pu, ps, sv, cl, pu + ps + sv + cl }' "$CPU"
echo
for peers in python c; do
  for sessions in 1 32; do
    h=${R[$peers|hookproxy|$sessions]}
    line="$peers peers, $sessions sessions: hookproxy / direct $(ratio "$h" "${R[$peers|direct|$sessions]}") (target ≥ 0.4)"
    if [ -n "${R[$peers|mitmdump|$sessions]:-}" ]; then
      line="$line, hookproxy / mitmdump $(ratio "$h" "${R[$peers|mitmdump|$sessions]}") (target ≥ 10)"
    fi
    echo "$line"
  done
done
