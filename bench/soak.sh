#!/usr/bin/env bash
# hookproxy soak test: 10 minutes of mixed load through one proxy, watching its memory, fds and threads.
#
#   bash bench/soak.sh            (or: make soak)
#   SOAK_SECONDS=60 HOOKPROXY=.build/debug/hookproxy bash bench/soak.sh      a quick check
#
# Environment knobs (all optional):
#   SOAK_SECONDS=600      how long the load runs
#   SOAK_WARMUP=S         the RSS/fd baseline is the last sample at or before S seconds (default: 10 % of the run,
#                         at least 10 s: 60 s for the default 10 minutes)
#   SOAK_INTERVAL=10      seconds between samples of the proxy's RSS, open fds and threads
#   SOAK_SETTLE=10        seconds of quiet after the load stops, before the final sample
#   SOAK_FD_SLACK=16      fds allowed above the warm-up figure at the end
#   SOAK_SLOWLORIS=30     slowloris connections at a time
#   SOAK_HEADER_TIMEOUT=30   the proxy's --header-timeout (seconds); the slowloris class checks it
#   SOAK_CAPTURE_LIMIT=   the proxy's --capture-limit (empty: its default, 1MiB)
#   SOAK_KEEP=1           keep the temp dir (logs, HAR, samples, certificates) and print its path
#   HOOKPROXY=PATH        the binary (default .build/release/hookproxy, built if missing)
#
# Everything runs on 127.0.0.1 with free ports: two Python origins (HTTP, and HTTPS with a CA and a localhost
# certificate made by openssl at run time), one hookproxy (--har, --intercept localhost, a trust rule with the
# origin's CA), and nine load classes (bench/soak.py), each bounded in time and in count. Every process it starts
# is stopped on exit. Exit status: 0 when RSS grew ≤ 10 % after warm-up, no fd leaked, the proxy lived and stopped
# cleanly, and no class counted a failure (what each counts is printed with the table); 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SECONDS_TOTAL=${SOAK_SECONDS:-600}
INTERVAL=${SOAK_INTERVAL:-10}
WARMUP=${SOAK_WARMUP:-$(( SECONDS_TOTAL / 10 > 10 ? SECONDS_TOTAL / 10 : 10 ))}
SETTLE=${SOAK_SETTLE:-10}
FD_SLACK=${SOAK_FD_SLACK:-16}
SLOWLORIS=${SOAK_SLOWLORIS:-30}
HEADER_TIMEOUT=${SOAK_HEADER_TIMEOUT:-30}
say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

for tool in curl openssl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "soak: $tool is required (make deps installs curl and openssl)" >&2; exit 2; }
done

# ---------------------------------------------------------------------------------------------------- binary
if [ -n "${HOOKPROXY:-}" ]; then
  SRC_BIN=$HOOKPROXY
else
  SRC_BIN="$ROOT/.build/release/hookproxy"
  if [ ! -x "$SRC_BIN" ]; then
    say "building hookproxy (release)"
    SRC_BIN=$(bash "$ROOT/bench/build-release.sh")
  fi
fi
[ -x "$SRC_BIN" ] || { echo "soak: no hookproxy binary at $SRC_BIN" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------------- temp dir
T=$(mktemp -d /tmp/hookproxy-soak.XXXXXX)
PIDS=()         # origins and proxy: stopped by pid
GROUPS_=()      # load classes: each leads its own process group (with the curls it runs)
PROXY_PID=""
cleanup() {
  local p i
  for p in "${GROUPS_[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for i in $(seq 1 50); do
    local alive=""
    for p in "${GROUPS_[@]}" "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for p in "${GROUPS_[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${SOAK_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private copy: a rebuild of the source binary during the soak neither breaks nor is broken by the run.
cp "$SRC_BIN" "$T/hookproxy"
BIN="$T/hookproxy"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# ---------------------------------------------------------------------------------------------------- certificates
# The HTTPS origin's CA and its localhost certificate, made now and removed with the temp dir (never committed).
say "certificates, origins and proxy in $T"
mkdir -p "$T/certs" "$T/rules" "$T/ca" "$T/results"
(
  cd "$T/certs"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=hookproxy soak origin CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout origin-ca.key -out origin-ca.pem
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout origin.key -out origin.csr
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' >origin.ext
  openssl x509 -req -in origin.csr -CA origin-ca.pem -CAkey origin-ca.key -CAcreateserial -days 2 -sha256 \
    -extfile origin.ext -out origin.pem
) >"$T/openssl.log" 2>&1 || { cat "$T/openssl.log" >&2; echo "soak: openssl failed" >&2; exit 2; }
head -c $((10 * 1024 * 1024)) /dev/urandom >"$T/10m.bin"

# ---------------------------------------------------------------------------------------------------- origins
OP=$(free_port); SP=$(free_port); PP=$(free_port)
python3 "$ROOT/bench/soak.py" origin --dir "$T" --port "$OP" >"$T/origin-http.log" 2>&1 &
PIDS+=($!)
python3 "$ROOT/bench/soak.py" origin --dir "$T" --port "$SP" --tls "$T/certs/origin.pem" "$T/certs/origin.key" >"$T/origin-https.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 100); do
  curl -sf -o /dev/null "http://127.0.0.1:$OP/small" && curl -sf -o /dev/null --cacert "$T/certs/origin-ca.pem" "https://localhost:$SP/small" && break
  sleep 0.1
done
curl -sSf -o /dev/null "http://127.0.0.1:$OP/small" && curl -sSf -o /dev/null --cacert "$T/certs/origin-ca.pem" "https://localhost:$SP/small" \
  || { tail "$T"/origin-*.log >&2; echo "soak: the origins did not start" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------------- proxy
cat >"$T/rules/soak.yaml" <<EOF
rules:
  # The HTTPS origin's certificate chains to a CA made for this run: hookproxy verifies it with that CA only.
  - name: soak-origin-trust
    match: { host: localhost }
    trust: { ca_file: "$T/certs/origin-ca.pem" }
EOF
"$BIN" check --rules "$T/rules" >"$T/rules-check.log" 2>&1 || { cat "$T/rules-check.log" >&2; echo "soak: the rules do not load" >&2; exit 2; }
"$BIN" ca path --ca-dir "$T/ca" >/dev/null      # creates the interception CA now, so clients can trust it from the start
[ -s "$T/ca/hookproxy-ca.pem" ] || { echo "soak: no CA in $T/ca" >&2; exit 2; }

PROXY_ARGS=(run --listen "127.0.0.1:$PP" --quiet --rules "$T/rules" --har "$T/soak.har" --intercept localhost
            --ca-dir "$T/ca" --header-timeout "${HEADER_TIMEOUT}s")
[ -n "${SOAK_CAPTURE_LIMIT:-}" ] && PROXY_ARGS+=(--capture-limit "$SOAK_CAPTURE_LIMIT")
(cd "$T" && exec "$BIN" "${PROXY_ARGS[@]}") >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
for i in $(seq 1 300); do
  curl -sf -o /dev/null --max-time 2 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$OP/small" && break
  kill -0 "$PROXY_PID" 2>/dev/null || break
  sleep 0.1
done
curl -sSf -o /dev/null --max-time 2 -x "http://127.0.0.1:$PP" "http://127.0.0.1:$OP/small" \
  || { tail -20 "$T/proxy.log" >&2; echo "soak: hookproxy did not start" >&2; exit 2; }
curl -sSf -o /dev/null --max-time 5 -x "http://127.0.0.1:$PP" --cacert "$T/ca/hookproxy-ca.pem" "https://localhost:$SP/small" \
  || { tail -20 "$T/proxy.log" >&2; echo "soak: the intercepted path does not work" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------------- sampling
# samples.tsv: elapsed-seconds RSS-KiB fds threads
status_field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$PROXY_PID/status" 2>/dev/null; }
sample() { # ELAPSED -> appends a line; fails when the proxy is gone
  local rss thr fds
  rss=$(status_field VmRSS) && thr=$(status_field Threads) && [ -n "$rss" ] || return 1
  fds=$(ls "/proc/$PROXY_PID/fd" 2>/dev/null | wc -l)
  printf '%s %s %s %s\n' "$1" "$rss" "$fds" "$thr" >>"$T/samples.tsv"
  printf '   %4ss  RSS %6.1f MiB  fds %4s  threads %3s  HAR %s\n' "$1" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$fds" "$thr" \
    "$(du -h "$T/soak.har" 2>/dev/null | cut -f1)" >&2
}
sleep 1
sample 0

# ---------------------------------------------------------------------------------------------------- load
START=$(date +%s)
UNTIL=$((START + SECONDS_TOTAL))
say "load for ${SECONDS_TOTAL}s (warm-up ${WARMUP}s, a sample every ${INTERVAL}s): proxy :$PP, origins :$OP (http) :$SP (https)"
start_class() { # CLASS [extra args] — its own process group (soak.py calls setpgid), stopped with its curls
  python3 "$ROOT/bench/soak.py" "$1" --dir "$T" --proxy "$PP" --origin "$OP" --tls-origin "$SP" --until "$UNTIL" \
    --header-timeout "$HEADER_TIMEOUT" "${@:2}" >"$T/results/$1.log" 2>&1 &
  GROUPS_+=($!)
}
start_class keepalive --conns 4
start_class newconn --conns 2
start_class download
start_class upload
start_class tunnel
start_class intercept
start_class abandon
start_class slowloris --conns "$SLOWLORIS"
start_class malformed

ALIVE=1; DIED=""
next=$INTERVAL
while :; do
  now=$(date +%s)
  [ "$now" -ge "$UNTIL" ] && break
  if [ $((now - START)) -ge "$next" ]; then
    if ! kill -0 "$PROXY_PID" 2>/dev/null || ! sample $((now - START)); then
      ALIVE=0; DIED="$((now - START)) s"; echo "   hookproxy is gone at $DIED; its log:" >&2; tail -30 "$T/proxy.log" >&2
      break
    fi
    next=$((next + INTERVAL))
  fi
  sleep 1
done
LOAD_END=$(( $(date +%s) - START ))
kill -0 "$PROXY_PID" 2>/dev/null && sample "$LOAD_END" || true

# The classes stop by themselves at UNTIL (a transfer in flight may take up to its curl --max-time); then any left.
# When the proxy died there is nothing left to measure: stop them now.
if [ "$ALIVE" = 0 ]; then
  for p in "${GROUPS_[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
fi
say "load stopped; waiting for the classes to finish"
for i in $(seq 1 90); do
  left=""; for p in "${GROUPS_[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
  [ -z "$left" ] && break
  sleep 1
done
for p in "${GROUPS_[@]}"; do
  if kill -0 "$p" 2>/dev/null; then echo "   stopping a class still running (pid $p)" >&2; kill -TERM -- "-$p" 2>/dev/null || true; fi
done
sleep 1

# ---------------------------------------------------------------------------------------------------- settle, stop
FINAL=()
if [ "$ALIVE" = 1 ] && kill -0 "$PROXY_PID" 2>/dev/null; then
  say "settling ${SETTLE}s"
  sleep "$SETTLE"
fi
if kill -0 "$PROXY_PID" 2>/dev/null; then
  rss=$(status_field VmRSS); thr=$(status_field Threads); hwm=$(status_field VmHWM)
  fds=$(ls "/proc/$PROXY_PID/fd" 2>/dev/null | wc -l)
  printf '   settled  RSS %6.1f MiB  fds %4s  threads %3s\n' "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$fds" "$thr" >&2
  FINAL+=(rss="$rss" fds="$fds" threads="$thr" hwm="$hwm" alive="$ALIVE" died="${DIED:-?}")
  kill -TERM "$PROXY_PID"
  code=""
  for i in $(seq 1 150); do
    if ! kill -0 "$PROXY_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if kill -0 "$PROXY_PID" 2>/dev/null; then
    code="still running 15 s after SIGTERM"; kill -KILL "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true
  else
    set +e; wait "$PROXY_PID"; code=$?; set -e
  fi
  FINAL+=(exit="$code")
else
  last=$(tail -1 "$T/samples.tsv")
  read -r _ rss fds thr <<<"$last"
  FINAL+=(rss="$rss" fds="$fds" threads="$thr" hwm="$rss" alive=0 died="${DIED:-after the load}" exit="none (died)")
  [ -n "$DIED" ] || { echo "   hookproxy is gone after the load; its log:" >&2; tail -30 "$T/proxy.log" >&2; }
fi

# ---------------------------------------------------------------------------------------------------- report
HAR_BYTES=$(stat -c %s "$T/soak.har" 2>/dev/null || echo 0)
HAR_OK="not checked (over 256 MiB)"
if [ "$HAR_BYTES" -le $((256 * 1024 * 1024)) ]; then
  HAR_OK=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("valid JSON, %d entries" % len(d["log"]["entries"]))' "$T/soak.har" 2>&1 | tail -1)
fi
MD="$ROOT/bench/results/soak-latest.md"
mkdir -p "$ROOT/bench/results"
set +e
{
  echo "hookproxy soak, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), binary ${SRC_BIN#"$ROOT"/}, ${SECONDS_TOTAL}s of load"
  echo
  python3 "$ROOT/bench/soak.py" report --dir "$T" --warmup "$WARMUP" --load-end "$LOAD_END" --fd-slack "$FD_SLACK" --final "${FINAL[@]}"
  echo $? >"$T/verdict"
  echo
  echo "HAR log: $(awk -v b="$HAR_BYTES" 'BEGIN{printf "%.1f MiB", b/1048576}') after the run ($HAR_OK); proxy log (--quiet: warnings and errors): $(wc -l <"$T/proxy.log") lines."
} >"$MD"
set -e
VERDICT=$(cat "$T/verdict" 2>/dev/null || echo 1)
echo
cat "$MD"
echo
echo "(written to ${MD#"$ROOT"/})"
if [ "$VERDICT" != 0 ]; then
  echo "soak: FAILED (see the checks above)" >&2
  echo "the proxy's log, grouped (addresses and times masked):" >&2
  sed -E 's/^[0-9T:.+-]+ //; s/[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+ //; s/:[0-9]{2,5}\b/:PORT/g; s/[0-9]+ (ms|B|KiB|MiB)\b/N \1/g' "$T/proxy.log" \
    | sort | uniq -c | sort -rn | head -15 >&2 || true
  exit 1
fi
echo "soak: passed" >&2
