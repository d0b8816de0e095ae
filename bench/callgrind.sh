#!/usr/bin/env bash
# Instructions per proxied request: hookproxy (release) under valgrind --tool=callgrind, keep-alive GET 1 KiB through
# an nginx upstream on loopback. Instruction counts repeat on a busy machine where req/s and CPU µs do not.
#
#   bash bench/callgrind.sh                           (or: make callgrind)
#   HOOKPROXY=/tmp/a/hookproxy bash bench/callgrind.sh   a given binary instead of building .build/release/hookproxy
#
# For each case (one hookproxy process under callgrind per case and run):
#   start it, wait until it answers, then for each load: warm-up of the same shape (upstream connections open, lazy
#   set-up done), `callgrind_control -z` (zero), the measured requests, wait until the --har/--jsonl log holds them
#   all, `callgrind_control -d` (dump). Start-up and shutdown are outside every dump. Callgrind counts every thread
#   (NIO event loops, the curl thread, the log thread) into one total (--separate-threads=no, its default).
# Loads (a Python http.client per connection, absolute-form GET, each response checked: 200 and 1024 bytes):
#   seq:  1 keep-alive connection × CALLGRIND_SEQ requests (2000)
#   conc: CALLGRIND_CONNS connections (8) × CALLGRIND_PER requests (250), at once
#   fresh: CALLGRIND_FRESH requests (1000), each on a new connection with `Connection: close` (not in the default
#          loads; the keep-alive loads leave out accepting and closing, which the "new conn/req" case of run.sh pays)
# The `ws` case (not in the default cases) has one load of its own: bench/ws_peer.c's C client, CALLGRIND_WS_SESSIONS
# (32) WebSocket sessions echoing 1 KiB messages for CALLGRIND_WS_SECONDS (10) through hookproxy as a reverse proxy
# (`--reverse` to ws_peer's server, as bench/ws.sh runs it); "requests" are then round trips (two messages relayed).
# Prints a markdown table: case, load, requests, instructions (Ir) per request (with CALLGRIND_REPEAT > 1: the mean
# and the spread of the runs), also written to bench/results/callgrind-latest.md (git-ignored). The top functions
# (self and inclusive, Ir per request) of every dump go to TMP/top-CASE-LOAD-RUN-{self,incl}.txt; CALLGRIND_TOP=1
# prints the plain case's (seq load, first run).
#
# Cases: plain (the traffic viewer on, the default), har, jsonl, rules50 (50 rules), noui (--no-ui: no records built),
# ws (WebSocket relay, above; only when named).
# Knobs: HOOKPROXY, CALLGRIND_CASES ("plain har jsonl rules50 noui"), CALLGRIND_LOADS ("seq conc"), CALLGRIND_SEQ (2000),
# CALLGRIND_CONNS (8), CALLGRIND_PER (250), CALLGRIND_FRESH (1000), CALLGRIND_WARMUP (50 requests per connection), CALLGRIND_REPEAT (1),
# CALLGRIND_TIMEOUT (900 s per load), CALLGRIND_TOP, BENCH_KEEP=1 (keep the temp dir: dumps, logs, top lists).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CASES=${CALLGRIND_CASES:-"plain har jsonl rules50 noui"}
LOADS=${CALLGRIND_LOADS:-"seq conc"}
SEQ=${CALLGRIND_SEQ:-2000}
CONNS=${CALLGRIND_CONNS:-8}
PER=${CALLGRIND_PER:-250}
FRESH=${CALLGRIND_FRESH:-1000}
WARMUP=${CALLGRIND_WARMUP:-50}
WS_SESSIONS=${CALLGRIND_WS_SESSIONS:-32}
WS_SECONDS=${CALLGRIND_WS_SECONDS:-10}
REPEAT=${CALLGRIND_REPEAT:-1}
LOAD_TIMEOUT=${CALLGRIND_TIMEOUT:-900}
PATH="$PATH:/usr/sbin:/sbin"
for t in valgrind callgrind_control callgrind_annotate objcopy "${CC:-cc}" nginx curl python3; do
  command -v "$t" >/dev/null || { echo "$t is not installed (apt-get install valgrind binutils gcc nginx-light curl python3)" >&2; exit 1; }
done
if [ -z "${HOOKPROXY:-}" ]; then
  HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")
fi
HOOKPROXY=$(realpath "$HOOKPROXY")
DEMANGLE=(cat)
command -v swift-demangle >/dev/null && DEMANGLE=(swift-demangle --simplified)

T=$(mktemp -d /tmp/hookproxy-callgrind.XXXXXX)
chmod 755 "$T"
PIDS=()
stop_pid() { # PID [seconds]: SIGTERM, then SIGKILL after the grace period (valgrind writes its last dump on exit)
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 $(( ${2:-5} * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do stop_pid "$p" 30; done
  if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
say() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------------- upstream, rules
mkdir -p "$T/www" "$T/nginx" "$T/rules" "$T/rules50" "$T/cg"
source "$ROOT/bench/valgrind-copy.sh"
valgrind_copy "$HOOKPROXY" "$T"
head -c 1024 /dev/urandom >"$T/www/1k.bin"; chmod -R a+rX "$T/www"
NP=$(free_port)
cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $T/nginx/nginx.pid; error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 10000000; keepalive_timeout 600s; client_body_temp_path $T/nginx/body;
  proxy_temp_path $T/nginx/proxy; fastcgi_temp_path $T/nginx/fastcgi; uwsgi_temp_path $T/nginx/uwsgi;
  scgi_temp_path $T/nginx/scgi;
  server { listen 127.0.0.1:$NP; root $T/www; } }
EOF
nginx -p "$T/nginx" -c "$T/nginx/nginx.conf" & PIDS+=($!)
for _ in $(seq 1 50); do curl -sf -o /dev/null "http://127.0.0.1:$NP/1k.bin" && break; sleep 0.1; done
bash "$ROOT/bench/rules50.sh" "$NP" >"$T/rules50/bench.yaml"
if [[ " $CASES " == *" ws "* ]]; then  # the WebSocket echo server the `ws` case proxies to
  "${CC:-cc}" -O2 -pthread -o "$T/ws_peer" "$ROOT/bench/ws_peer.c"
  WSP=$(free_port); "$T/ws_peer" server "$WSP" & PIDS+=($!)
  for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$WSP") 2>/dev/null && break; sleep 0.1; done
fi
"$HOOKPROXY" check --rules "$T/rules50" >"$T/rules-check.log" 2>&1 || { cat "$T/rules-check.log" >&2; exit 1; }

# The client: CONNS keep-alive connections × PER requests each, all started together; prints the responses served
# (200 with the 1024-byte body). Any other answer or a socket error fails the load.
cat >"$T/client.py" <<'EOF'
import http.client, sys, threading
port, upstream, conns, per = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fresh = len(sys.argv) > 5 and sys.argv[5] == "fresh"  # a new connection per request, "Connection: close"
url, host = "http://127.0.0.1:%d/1k.bin" % upstream, "127.0.0.1:%d" % upstream
served, errors = [0] * conns, []
start = threading.Barrier(conns)
def run(i):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.connect()
        start.wait()
        for _ in range(per):
            if fresh:
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("GET", url, headers={"Host": host, "Connection": "close"} if fresh else {"Host": host})
            r = c.getresponse()
            body = r.read()
            if r.status != 200 or len(body) != 1024:
                errors.append("connection %d: status %d, %d bytes" % (i, r.status, len(body)))
                return
            served[i] += 1
        c.close()
    except Exception as e:
        errors.append("connection %d: %r" % (i, e))
threads = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
print(sum(served))
for e in errors: print(e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

# ---------------------------------------------------------------------------------------------------- measuring
LOGFILE=""; LOGKIND=""
log_entries() { # records in the --har / --jsonl file so far
  case $LOGKIND in
    har) grep -o '"startedDateTime"' "$LOGFILE" 2>/dev/null | wc -l ;;
    jsonl) wc -l <"$LOGFILE" 2>/dev/null || echo 0 ;;
    *) echo 0 ;;
  esac
}
# Waits until the log thread has written EXPECTED records and the file stopped growing, so the dump holds their cost.
wait_log() {
  [ -n "$LOGKIND" ] || return 0
  local want=$1 i size last=-1
  for i in $(seq 1 600); do [ "$(log_entries)" -ge "$want" ] && break; sleep 0.5; done
  [ "$(log_entries)" -ge "$want" ] || { echo "the $LOGKIND log holds $(log_entries) of $want entries" >&2; return 1; }
  for i in $(seq 1 60); do size=$(stat -c %s "$LOGFILE"); [ "$size" = "$last" ] && break; last=$size; sleep 1; done
}
# The dump's event count (all threads since the last zero; "Collected" at exit). Its totals: line, the sum of the cost
# lines, is written last, so a dump is complete when it is there. (After a zero the two differ, by ≤ 0.2 %.)
total_ir() { awk '/^summary:/ { s = $2 } /^totals:/ { t = $2 } END { if (t != "") print s }' "$1"; }
# The costliest functions of a dump, self and inclusive, in Ir per request, to OUT-PREFIX-{self,incl}.txt (40 each;
# inclusive leaves out recursion levels, NAME'2, counted twice). A call under way when the counters were zeroed shows
# as `calls=0` in the dump, and callgrind_annotate 3.19 then books the whole call as the caller's self cost (clone,
# start_thread at 100 %): it reads a copy with `calls=1`.
annotate_top() { # DUMP REQUESTS OUT-PREFIX
  local f=$1 n=$2 out=$3 mode
  sed 's/^calls=0 /calls=1 /' "$f" >"$f.annotate"
  for mode in self incl; do
    callgrind_annotate --inclusive=$([ $mode = incl ] && echo yes || echo no) --threshold=100 "$f.annotate" \
      >"$out-$mode.raw" 2>/dev/null || true
    awk -v n="$n" -v mode=$mode '/^-+$/ { dashes++; next }
      dashes >= 4 && $1 ~ /^[0-9,]+$/ && !/PROGRAM TOTALS/ {
        ir = $1; gsub(",", "", ir); p = index($0, "("); q = index($0, ")")
        pct = substr($0, p + 1, q - p - 1); gsub(" ", "", pct); name = substr($0, q + 1); sub(/^ +/, "", name)
        sub(/^([?][?][?]|[^ :]*[.][A-Za-z]+):/, "", name)
        if (mode == "incl" && name ~ /\047[0-9]+ \[/) next
        printf "%10.0f %7s  %s\n", ir / n, pct, name; if (++k == 40) exit }' "$out-$mode.raw" \
      | "${DEMANGLE[@]}" | sed -E 's# \[[^]]*/([^]/]*)\]$# [\1]#' | cut -c1-200 >"$out-$mode.txt"
    rm -f "$out-$mode.raw"
  done
  rm -f "$f.annotate"
}

declare -A IR REQS
case_loads() { if [ "$1" = ws ]; then echo ws; else echo "$LOADS"; fi; }  # CASE → its loads
SERVED_SO_FAR=0
measure() { # CASE LOAD RUN PORT PID
  local c=$1 load=$2 run=$3 port=$4 pid=$5 conns per n before dump ir
  case $load in
    seq) conns=1; per=$SEQ ;;
    conc) conns=$CONNS; per=$PER ;;
    fresh) conns=1; per=$FRESH ;;
    ws) conns=$WS_SESSIONS ;;
    *) echo "unknown load $load" >&2; exit 2 ;;
  esac
  if [ "$load" = ws ]; then  # round trips per second through the reverse listener, for a warm-up and the count
    "$T/ws_peer" client 127.0.0.1 "$WSRP" / "$conns" 2 1024 >/dev/null || { echo "warm-up failed ($c $load)" >&2; exit 1; }
    callgrind_control -z "$pid" >"$T/control.log" 2>&1 || { cat "$T/control.log" >&2; exit 1; }
    n=$("$T/ws_peer" client 127.0.0.1 "$WSRP" / "$conns" "$WS_SECONDS" 1024 2>"$T/ws-client.err") \
      || { cat "$T/ws-client.err" >&2; echo "load failed ($c $load run $run)" >&2; exit 1; }
    # ws_peer exits 0 when any session made a round trip: a session that failed fails the count here.
    [ -s "$T/ws-client.err" ] && { cat "$T/ws-client.err" >&2; echo "a session failed ($c $load run $run)" >&2; exit 1; }
    n=$((n * WS_SECONDS))  # (the client prints round trips per second over exactly WS_SECONDS)
    sleep 1                # the sessions' close frames and records, as the HTTP loads wait for their logs
  else
    local mode=""; [ "$load" = fresh ] && mode=fresh
    n=$(python3 "$T/client.py" "$port" "$NP" "$conns" "$WARMUP" $mode) || { echo "warm-up failed ($c $load)" >&2; exit 1; }
    SERVED_SO_FAR=$((SERVED_SO_FAR + n)); wait_log "$SERVED_SO_FAR"
    callgrind_control -z "$pid" >"$T/control.log" 2>&1 || { cat "$T/control.log" >&2; exit 1; }
    n=$(timeout "$LOAD_TIMEOUT" python3 "$T/client.py" "$port" "$NP" "$conns" "$per" $mode) \
      || { echo "load failed or timed out ($c $load run $run)" >&2; exit 1; }
    SERVED_SO_FAR=$((SERVED_SO_FAR + n)); wait_log "$SERVED_SO_FAR"
  fi
  before=$(ls "$T/cg")
  callgrind_control -d "$c-$load-$run" "$pid" >"$T/control.log" 2>&1 || { cat "$T/control.log" >&2; exit 1; }
  for _ in $(seq 1 100); do
    dump=$(comm -13 <(echo "$before") <(ls "$T/cg") | head -1)
    [ -n "$dump" ] && [ -n "$(total_ir "$T/cg/$dump")" ] && break; sleep 0.1
  done
  ir=$(total_ir "$T/cg/$dump")
  [ -n "$ir" ] || { echo "no callgrind dump for $c $load run $run" >&2; exit 1; }
  mv "$T/cg/$dump" "$T/cg/$c-$load-$run.out"
  IR["$c|$load|$run"]=$ir; REQS["$c|$load|$run"]=$n
  annotate_top "$T/cg/$c-$load-$run.out" "$n" "$T/top-$c-$load-$run"
  say "$c $load run $run: $n requests, $ir Ir, $(awk -v a="$ir" -v n="$n" 'BEGIN{printf "%.0f", a / n}') Ir/request"
}

say "$(valgrind --version), binary $HOOKPROXY, temp dir $T"
for run in $(seq 1 "$REPEAT"); do
  for c in $CASES; do
    args=(--rules "$T/rules"); LOGKIND=""; LOGFILE=""
    case $c in
      plain) ;;
      har) LOGKIND=har; LOGFILE="$T/$c-$run.har"; args+=(--har "$LOGFILE") ;;
      jsonl) LOGKIND=jsonl; LOGFILE="$T/$c-$run.jsonl"; args+=(--jsonl "$LOGFILE") ;;
      rules50) args=(--rules "$T/rules50") ;;
      noui) args+=(--no-ui) ;;
      ws) WSRP=$(free_port); args+=(--reverse "127.0.0.1:$WSRP=http://127.0.0.1:$WSP") ;;
      *) echo "unknown case $c" >&2; exit 2 ;;
    esac
    HP=$(free_port)
    # GNUTLS_NO_IMPLICIT_INIT set: hookproxy does not execute itself again at start (which valgrind would not follow).
    (cd "$T" && GNUTLS_NO_IMPLICIT_INIT=1 LD_PRELOAD="$T/sigsuspend-copy.so" exec valgrind --tool=callgrind \
        --callgrind-out-file="$T/cg/$c-$run.startup" "$T/hookproxy" run --listen "127.0.0.1:$HP" --quiet "${args[@]}") >"$T/hookproxy-$c-$run.log" 2>&1 &
    HPID=$!; PIDS+=("$HPID")
    for _ in $(seq 1 240); do
      kill -0 "$HPID" 2>/dev/null || break
      curl -sf -o /dev/null --max-time 20 -x "http://127.0.0.1:$HP" "http://127.0.0.1:$NP/1k.bin" && break; sleep 0.5
    done
    curl -sf -o /dev/null --max-time 20 -x "http://127.0.0.1:$HP" "http://127.0.0.1:$NP/1k.bin" \
      || { tail -20 "$T/hookproxy-$c-$run.log" >&2; echo "hookproxy did not start under valgrind ($c)" >&2; exit 1; }
    SERVED_SO_FAR=2   # the two probes above
    for load in $(case_loads "$c"); do measure "$c" "$load" "$run" "$HP" "$HPID"; done
    stop_pid "$HPID" 30
    grep -i 'dropped\|error' "$T/hookproxy-$c-$run.log" | grep -v '^==' | head -5 >&2 || true
  done
done

# ---------------------------------------------------------------------------------------------------- report
MD="$ROOT/bench/results/callgrind-latest.md"
mkdir -p "$ROOT/bench/results"
{
  echo "hookproxy callgrind, $(date -u '+%Y-%m-%d %H:%M UTC'), $(valgrind --version), binary $HOOKPROXY, $REPEAT run(s) per case"
  echo
  if [ "$REPEAT" -gt 1 ]; then
    echo "| case | load | requests | instructions per request (mean) | runs | spread (max − min) / mean |"
    echo "| --- | --- | ---: | ---: | --- | ---: |"
  else
    echo "| case | load | requests | instructions per request |"
    echo "| --- | --- | ---: | ---: |"
  fi
  for c in $CASES; do
    for load in $(case_loads "$c"); do
      per_run=""; reqs=""
      for run in $(seq 1 "$REPEAT"); do
        per_run="$per_run $(awk -v a="${IR["$c|$load|$run"]}" -v n="${REQS["$c|$load|$run"]}" 'BEGIN{printf "%.0f", a / n}')"
        reqs=${REQS["$c|$load|$run"]}
      done
      case $load in seq) shape="1 conn × $SEQ" ;; conc) shape="$CONNS conns × $PER" ;; fresh) shape="$FRESH conns × 1" ;;
        ws) shape="$WS_SESSIONS WebSocket sessions × ${WS_SECONDS} s (per round trip)" ;; esac
      if [ "$REPEAT" -gt 1 ]; then
        echo "$per_run" | awk -v c="$c" -v l="$shape" -v r="$reqs" '{ s = 0; mn = $1; mx = $1; runs = ""
          for (i = 1; i <= NF; i++) { s += $i; if ($i < mn) mn = $i; if ($i > mx) mx = $i; runs = runs (i > 1 ? ", " : "") $i }
          printf "| %s | %s | %s | %.0f | %s | %.2f %% |\n", c, l, r, s / NF, runs, 100 * (mx - mn) / (s / NF) }'
      else
        echo "| $c | $shape | $reqs |$per_run |"
      fi
    done
  done
} | tee "$MD"
if [ -n "${CALLGRIND_TOP:-}" ] && [ -f "$T/top-plain-seq-1-self.txt" ]; then
  echo; echo "plain, 1 connection: top functions by self cost (Ir per request, % of the dump)"
  head -15 "$T/top-plain-seq-1-self.txt"
  echo; echo "plain, 1 connection: top functions by inclusive cost (thread entry points first)"
  head -30 "$T/top-plain-seq-1-incl.txt"
fi
