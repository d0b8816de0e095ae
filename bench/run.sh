#!/usr/bin/env bash
# hookproxy benchmark: direct vs hookproxy vs squid vs tinyproxy vs mitmdump, one at a time, on 127.0.0.1.
#
#   bash bench/run.sh            (or: make bench)
#
# Environment knobs (all optional):
#   BENCH_DURATION=10     seconds per wrk run (keep-alive cases; the connection-per-request case uses half)
#   BENCH_PROXIES="direct hookproxy hookproxy+har hookproxy+rules hookproxy+no-ui hookproxy+watched squid tinyproxy mitmdump"
#                         what to run (hookproxy runs with its traffic viewer on, the default; +no-ui without it;
#                         +watched with a client reading the viewer's /api/events throughout)
#   BENCH_REPEAT_10M=10   how many sequential 10 MiB downloads
#   BENCH_PAIRED_ROUNDS=5, BENCH_PAIRED_DURATION=4
#                         costs measured paired: hookproxy, +no-ui, +watched, +har and +rules side by side, taking
#                         turns for this many rounds of this many seconds each (0 rounds: skip)
#   BENCH_KEEP=1          keep the temp dir (configs, logs, HAR) and print its path
#   BENCH_HOOKPROXY=PATH  use this hookproxy binary instead of building the release one
#
# It installs what is missing (Debian packages nginx-light wrk tinyproxy squid curl python3-venv; mitmproxy from
# PyPI into .build/benchvenv), builds hookproxy in release, writes every config into a temp dir, runs every daemon
# in the foreground under that config, and stops everything it started on exit. It never touches /etc or services.
# The table goes to stdout and to bench/results/latest.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DUR=${BENCH_DURATION:-10}
CLOSE_DUR=$(( DUR > 1 ? DUR / 2 : 1 ))
PROXIES=${BENCH_PROXIES:-"direct hookproxy hookproxy+har hookproxy+rules hookproxy+no-ui hookproxy+watched squid tinyproxy mitmdump"}
REPEAT_10M=${BENCH_REPEAT_10M:-10}
SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------------- install
need_pkgs=""
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_pkgs="$need_pkgs nginx-light"
command -v wrk >/dev/null 2>&1 || need_pkgs="$need_pkgs wrk"
[ -x /usr/sbin/squid ] || command -v squid >/dev/null 2>&1 || need_pkgs="$need_pkgs squid"
[ -x /usr/bin/tinyproxy ] || command -v tinyproxy >/dev/null 2>&1 || need_pkgs="$need_pkgs tinyproxy"
command -v curl >/dev/null 2>&1 || need_pkgs="$need_pkgs curl"
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_pkgs="$need_pkgs python3-venv"
if [ -n "$need_pkgs" ]; then
  say "installing:$need_pkgs"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_pkgs >/dev/null
  # Debian starts the services it installs; we run our own instances only, so stop those (never edit them).
  for svc in nginx squid tinyproxy; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then $SUDO systemctl stop "$svc" || true; fi
  done
fi
PATH="$PATH:/usr/sbin:/sbin"

VENV="$ROOT/.build/benchvenv"
MITMDUMP=""
if [ -x "$VENV/bin/mitmdump" ]; then
  MITMDUMP="$VENV/bin/mitmdump"
elif [[ " $PROXIES " == *" mitmdump "* ]]; then
  say "installing mitmproxy into $VENV"
  mkdir -p "$ROOT/.build"
  if python3 -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/pip" install -q --disable-pip-version-check mitmproxy >/dev/null 2>&1 \
     && [ -x "$VENV/bin/mitmdump" ]; then
    MITMDUMP="$VENV/bin/mitmdump"
  else
    echo "note: mitmproxy could not be installed on $(python3 --version 2>&1); mitmdump is skipped" >&2
  fi
fi

# ---------------------------------------------------------------------------------------------------- build
if [ -n "${BENCH_HOOKPROXY:-}" ]; then
  HOOKPROXY=$BENCH_HOOKPROXY
else
  say "building hookproxy (release)"
  HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")
fi

# ---------------------------------------------------------------------------------------------------- temp dir
T=$(mktemp -d /tmp/hookproxy-bench.XXXXXX)
chmod 755 "$T"
# The +har variant's log: on tmpfs when there is one. It grows by ~40 MB/s, and on disk the kernel writes it back
# about 30 s later, in the middle of whichever run comes next: the paired rounds measured 50 rules at 0.81x plain
# that way, against 0.99x in an interleaved run without the HAR's writeback. The log path's own work (encoding,
# write(2)) is the same on tmpfs.
HAR_DIR=$T
if [ -d /dev/shm ] && [ -w /dev/shm ]; then HAR_DIR=$(mktemp -d /dev/shm/hookproxy-bench-har.XXXXXX); fi
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  [ "$HAR_DIR" != "$T" ] && rm -rf "$HAR_DIR"
  if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# Unprivileged user the daemons drop to when we are root (squid refuses to run as root).
RUN_USER=nobody; RUN_GROUP=nogroup
getent group nogroup >/dev/null || RUN_GROUP=$(id -gn nobody 2>/dev/null || echo nobody)
if id proxy >/dev/null 2>&1; then RUN_USER=proxy; RUN_GROUP=proxy; fi

# ---------------------------------------------------------------------------------------------------- upstream
say "upstream files and nginx in $T"
mkdir -p "$T/www" "$T/nginx"
head -c 1024 /dev/urandom >"$T/www/1k.bin"
head -c 65536 /dev/urandom >"$T/www/64k.bin"
head -c $((10 * 1024 * 1024)) /dev/urandom >"$T/www/10m.bin"
truncate -s 1G "$T/www/1g.bin"     # sparse: nginx sends zeros straight from the page cache
chmod -R a+rX "$T/www"
NGINX_PORT=$(free_port)
cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  client_body_temp_path $T/nginx/body;
  proxy_temp_path $T/nginx/proxy;
  fastcgi_temp_path $T/nginx/fastcgi;
  uwsgi_temp_path $T/nginx/uwsgi;
  scgi_temp_path $T/nginx/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $T/www;
  }
}
EOF
nginx -p "$T/nginx" -c "$T/nginx/nginx.conf" >"$T/nginx/stdout.log" 2>&1 &
PIDS+=($!)
NGINX_PID=$!
UP="http://127.0.0.1:$NGINX_PORT"
for i in $(seq 1 50); do curl -sf -o /dev/null "$UP/1k.bin" && break; sleep 0.1; done
curl -sf -o /dev/null "$UP/1k.bin" || { cat "$T/nginx/error.log" >&2; echo "nginx did not start" >&2; exit 1; }

# wrk script: absolute-form requests (what a forward proxy expects) when BENCH_PATH is a URL; origin-form for direct.
cat >"$T/bench.lua" <<'EOF'
wrk.method = "GET"
wrk.path = os.getenv("BENCH_PATH")
if os.getenv("BENCH_CLOSE") == "1" then wrk.headers["Connection"] = "close" end
wrk.headers["Host"] = os.getenv("BENCH_HOST")
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
EOF

# ---------------------------------------------------------------------------------------------------- rules, HAR
mkdir -p "$T/rules-empty" "$T/rules50"
bash "$ROOT/bench/rules50.sh" "$NGINX_PORT" >"$T/rules50/bench.yaml"
if ! "$HOOKPROXY" check --rules "$T/rules50" >"$T/rules-check.log" 2>&1; then
  cat "$T/rules-check.log" >&2; echo "the generated rule set does not load" >&2; exit 1
fi

# ---------------------------------------------------------------------------------------------------- proxies
write_squid_conf() {
  mkdir -p "$T/squid"
  cat >"$T/squid/squid.conf" <<EOF
http_port 127.0.0.1:$1
acl bench_src src 127.0.0.1
http_access allow bench_src
http_access deny all
cache deny all
cache_mem 8 MB
pid_filename $T/squid/squid.pid
cache_log $T/squid/cache.log
access_log none
cache_store_log none
coredump_dir $T/squid
netdb_filename none
logfile_rotate 0
shutdown_lifetime 0 seconds
max_filedescriptors 8192
workers 1
dns_nameservers 127.0.0.1
cache_effective_user $RUN_USER
EOF
  [ "$(id -u)" = 0 ] && chown -R "$RUN_USER:$RUN_GROUP" "$T/squid"
  return 0
}
write_tinyproxy_conf() {
  mkdir -p "$T/tinyproxy"
  cat >"$T/tinyproxy/tinyproxy.conf" <<EOF
Port $1
Listen 127.0.0.1
Timeout 60
MaxClients 1024
Allow 127.0.0.1
LogLevel Error
LogFile "$T/tinyproxy/tinyproxy.log"
PidFile "$T/tinyproxy/tinyproxy.pid"
DisableViaHeader Yes
EOF
  if [ "$(id -u)" = 0 ]; then printf 'User %s\nGroup %s\n' "$RUN_USER" "$RUN_GROUP" >>"$T/tinyproxy/tinyproxy.conf"; chown -R "$RUN_USER:$RUN_GROUP" "$T/tinyproxy"; fi
  return 0
}

PROXY_PID=""; PROXY_PORT=""; WATCH_PID=""
start_proxy() { # NAME -> PROXY_PID, PROXY_PORT
  local name=$1 port; port=$(free_port)
  PROXY_PORT=$port
  case $name in
    hookproxy)       (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules-empty") >"$T/$name.log" 2>&1 & ;;
    hookproxy+har)   (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules-empty" --har "$HAR_DIR/bench.har") >"$T/$name.log" 2>&1 & ;;
    hookproxy+rules) (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules50") >"$T/$name.log" 2>&1 & ;;
    hookproxy+no-ui) (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules-empty" --no-ui) >"$T/$name.log" 2>&1 & ;;
    hookproxy+watched) (cd "$T" && exec "$HOOKPROXY" run --listen "127.0.0.1:$port" --quiet --rules "$T/rules-empty") >"$T/$name.log" 2>&1 & ;;
    squid)           write_squid_conf "$port"; squid -N -f "$T/squid/squid.conf" >"$T/$name.log" 2>&1 & ;;
    tinyproxy)       write_tinyproxy_conf "$port"; tinyproxy -d -c "$T/tinyproxy/tinyproxy.conf" >"$T/$name.log" 2>&1 & ;;
    # stream_large_bodies: mitmdump buffers every body whole by default; from 1 MiB up it streams instead.
    mitmdump)        mkdir -p "$T/mitm"; "$MITMDUMP" -q --listen-host 127.0.0.1 -p "$port" --set confdir="$T/mitm" \
                       --set stream_large_bodies=1m >"$T/$name.log" 2>&1 & ;;
  esac
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  local i
  for i in $(seq 1 300); do
    if curl -sf -o /dev/null --max-time 2 -x "http://127.0.0.1:$port" "$UP/1k.bin"; then
      if [ "$name" = hookproxy+watched ]; then
        # a browser tab on the viewer: reads every event while the load runs (ends when hookproxy stops)
        curl -sN -o /dev/null "http://127.0.0.1:$port/api/events" & WATCH_PID=$!; PIDS+=("$WATCH_PID")
      fi
      return 0
    fi
    kill -0 "$PROXY_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "$name did not start; its log:" >&2; tail -20 "$T/$name.log" >&2
  [ -f "$T/squid/cache.log" ] && [ "$name" = squid ] && tail -20 "$T/squid/cache.log" >&2
  return 1
}

# Stops the proxy under test and forgets its pid (so the exit trap never signals a reused pid).
stop_proxy() {
  local keep=() p
  stop_pid "$PROXY_PID"
  [ -n "$WATCH_PID" ] && stop_pid "$WATCH_PID"
  rm -f "$HAR_DIR/bench.har"  # (a GB or more after a run; the next +har start writes a new one)
  for p in "${PIDS[@]}"; do [ "$p" = "$PROXY_PID" ] || [ "$p" = "$WATCH_PID" ] || keep+=("$p"); done
  PIDS=("${keep[@]}"); PROXY_PID=""; WATCH_PID=""
}

tree_pids() { local p=$1 c; echo "$p"; for c in $(pgrep -P "$p" 2>/dev/null); do tree_pids "$c"; done; }
# utime+stime (+ reaped children) of the process tree, in clock ticks.
cpu_ticks() {
  local total=0 p f
  for p in $(tree_pids "$1"); do
    f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    f=${f##*) }
    total=$(awk -v t="$total" '{print t + $12 + $13 + $14 + $15}' <<<"$f")
  done
  echo "$total"
}
# Resident set of the process tree, KiB.
rss_kib() {
  local total=0 p v
  for p in $(tree_pids "$1"); do
    v=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null) || continue
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
TICK=$(getconf CLK_TCK)

declare -A R   # R[metric|proxy]=value
# wrk_case NAME CONNS THREADS DURATION CLOSE PATH
wrk_case() {
  local proxy=$1 conns=$2 threads=$3 dur=$4 close=$5 file=$6 key=$7 target path host out c0 c1
  if [ "$proxy" = direct ]; then target=$UP; path="/$file"; else target="http://127.0.0.1:$PROXY_PORT"; path="$UP/$file"; fi
  host="127.0.0.1:$NGINX_PORT"
  [ -n "$PROXY_PID" ] && c0=$(cpu_ticks "$PROXY_PID")
  out=$(BENCH_PATH=$path BENCH_HOST=$host BENCH_CLOSE=$close timeout $((dur + 20)) \
        wrk -t"$threads" -c"$conns" -d"${dur}s" --timeout 5s -s "$T/bench.lua" "$target" 2>&1) || true
  [ -n "$PROXY_PID" ] && c1=$(cpu_ticks "$PROXY_PID")
  local line; line=$(grep '^RESULT' <<<"$out" || true)
  if [ -z "$line" ]; then echo "wrk failed for $proxy/$key: $out" >&2; return 0; fi
  read -r _ reqs usecs p50 p99 status errs <<<"$line"
  R["$key rps|$proxy"]=$(awk -v r="$reqs" -v u="$usecs" 'BEGIN{printf "%.0f", r / (u / 1e6)}')
  R["$key p50|$proxy"]=$(awk -v v="$p50" 'BEGIN{printf "%.3f", v / 1000}')
  R["$key p99|$proxy"]=$(awk -v v="$p99" 'BEGIN{printf "%.3f", v / 1000}')
  [ "$file" != 1k.bin ] && R["$key MB/s|$proxy"]=$(awk -v r="$reqs" -v u="$usecs" -v s="$(stat -c %s "$T/www/$file")" 'BEGIN{printf "%.1f", r * s / (u / 1e6) / 1e6}')
  if [ -n "$PROXY_PID" ] && [ "$reqs" -gt 0 ]; then
    R["$key cpu µs/req|$proxy"]=$(awk -v d="$((c1 - c0))" -v t="$TICK" -v r="$reqs" 'BEGIN{printf "%.1f", d * 1e6 / t / r}')
  fi
  if [ $((status + errs)) -gt $((reqs / 100)) ]; then
    R["$key errors|$proxy"]="$status non-2xx, $errs socket"
  fi
  printf '   %-16s %-22s %8s req/s  p50 %s ms  p99 %s ms  cpu %s µs/req  (%s reqs, %s non-2xx, %s socket errors)\n' \
    "$proxy" "$key" "${R["$key rps|$proxy"]}" "${R["$key p50|$proxy"]}" "${R["$key p99|$proxy"]}" \
    "${R["$key cpu µs/req|$proxy"]:--}" "$reqs" "$status" "$errs" >&2
}

curl_proxy_args() { [ "$1" = direct ] && return 0; echo "-x http://127.0.0.1:$PROXY_PORT"; }

bench_10m() {
  local proxy=$1 i speeds="" s
  for i in $(seq 1 "$REPEAT_10M"); do
    # shellcheck disable=SC2046
    s=$(curl -sf $(curl_proxy_args "$proxy") --max-time 30 -o /dev/null -w '%{speed_download}' "$UP/10m.bin") || s=0
    speeds="$speeds $s"
  done
  R["10 MiB transfer MB/s|$proxy"]=$(tr ' ' '\n' <<<"$speeds" | grep . | sort -g | awk '{a[NR]=$1} END{printf "%.1f", a[int((NR+1)/2)] / 1e6}')
  printf '   %-16s %-22s %8s MB/s (median of %s)\n' "$proxy" "10 MiB transfer" "${R["10 MiB transfer MB/s|$proxy"]}" "$REPEAT_10M" >&2
}

bench_1g() {
  local proxy=$1 before peak cpid out v
  [ -n "$PROXY_PID" ] && before=$(rss_kib "$PROXY_PID")
  peak=${before:-0}
  # shellcheck disable=SC2046
  curl -sf $(curl_proxy_args "$proxy") --max-time 90 -o /dev/null -w '%{time_starttransfer} %{speed_download} %{size_download}' \
    "$UP/1g.bin" >"$T/1g.out" 2>&1 &
  cpid=$!
  while kill -0 "$cpid" 2>/dev/null; do
    if [ -n "$PROXY_PID" ]; then v=$(rss_kib "$PROXY_PID"); [ "$v" -gt "$peak" ] && peak=$v; fi
    sleep 0.05
  done
  wait "$cpid" || true
  read -r ttfb speed size <"$T/1g.out" || true
  R["1 GiB first byte ms|$proxy"]=$(awk -v v="${ttfb:-0}" 'BEGIN{printf "%.1f", v * 1000}')
  R["1 GiB transfer MB/s|$proxy"]=$(awk -v v="${speed:-0}" 'BEGIN{printf "%.1f", v / 1e6}')
  [ "${size:-0}" != 1073741824 ] && R["1 GiB errors|$proxy"]="got ${size:-0} bytes"
  [ -n "$PROXY_PID" ] && R["1 GiB RSS growth MiB|$proxy"]=$(awk -v a="$before" -v b="$peak" 'BEGIN{printf "%.1f", (b - a) / 1024}')
  printf '   %-16s %-22s first byte %s ms, %s MB/s, RSS growth %s MiB\n' "$proxy" "1 GiB transfer" \
    "${R["1 GiB first byte ms|$proxy"]}" "${R["1 GiB transfer MB/s|$proxy"]}" "${R["1 GiB RSS growth MiB|$proxy"]:--}" >&2
}

run_proxy() {
  local proxy=$1
  if [ "$proxy" = mitmdump ] && [ -z "$MITMDUMP" ]; then echo "   mitmdump: skipped (not installed)" >&2; return 0; fi
  PROXY_PID=""; PROXY_PORT=""
  if [ "$proxy" != direct ]; then
    start_proxy "$proxy" || { R["start errors|$proxy"]="did not start"; stop_proxy; return 0; }
    sleep 1
    R["idle RSS MiB|$proxy"]=$(awk -v k="$(rss_kib "$PROXY_PID")" 'BEGIN{printf "%.1f", k / 1024}')
    printf '   %-16s %-22s %s MiB\n' "$proxy" "idle RSS" "${R["idle RSS MiB|$proxy"]}" >&2
  fi
  case $proxy in
    hookproxy+har|hookproxy+rules|hookproxy+no-ui|hookproxy+watched)
      wrk_case "$proxy" 64 2 "$DUR" 0 1k.bin "keep-alive 1 KiB c64" ;;
    *)
      # The 1 GiB transfer first, so its RSS growth is measured from the idle figure (not after the load runs).
      bench_1g "$proxy"
      bench_10m "$proxy"
      wrk_case "$proxy" 1 1 "$DUR" 0 1k.bin "keep-alive 1 KiB c1"
      wrk_case "$proxy" 64 2 "$DUR" 0 1k.bin "keep-alive 1 KiB c64"
      wrk_case "$proxy" 16 2 "$CLOSE_DUR" 1 1k.bin "new conn/req 1 KiB c16"
      wrk_case "$proxy" 16 2 "$CLOSE_DUR" 0 64k.bin "keep-alive 64 KiB c16" ;;
  esac
  if [ -n "$PROXY_PID" ]; then stop_proxy; fi
}

say "measuring ($DUR s per keep-alive run): $PROXIES"
for p in $PROXIES; do
  say "$p"
  run_proxy "$p"
  sleep 1
done

# The costs of the viewer (issue 17), --har and 50 rules (issue 14), paired: one proxy after another, this machine's
# throughput swings by ±15 % from one minute to the next, more than the costs measured. So hookproxy and its
# variants (viewer off, watched, --har, 50 rules) run side by side, each warmed up the same way, and take turns:
# PAIRED_ROUNDS rounds of one PAIRED_DUR-second c64 run each; the medians are compared.
PAIRED_ROUNDS=${BENCH_PAIRED_ROUNDS:-5}
PAIRED_DUR=${BENCH_PAIRED_DURATION:-4}
median() { tr ' ' '\n' <<<"$*" | grep . | sort -g | awk '{a[NR]=$1} END{ if (NR) printf "%.1f", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2 }'; }
PAIRED_VARIANTS="hookproxy hookproxy+no-ui hookproxy+watched hookproxy+har hookproxy+rules"
paired_costs() {
  local names=() n r rps cpu
  for n in $PAIRED_VARIANTS; do [[ " $PROXIES " == *" $n "* ]] && names+=("$n"); done
  [ "${#names[@]}" -ge 2 ] && [ "$PAIRED_ROUNDS" -gt 0 ] || return 0
  say "costs, paired: ${names[*]}, $PAIRED_ROUNDS rounds of ${PAIRED_DUR}s each"
  declare -A pid port watch
  for n in "${names[@]}"; do
    start_proxy "$n" || { R["start errors|$n"]="did not start (paired)"; return 0; }
    pid[$n]=$PROXY_PID; port[$n]=$PROXY_PORT; watch[$n]=$WATCH_PID
  done
  for r in $(seq 0 "$PAIRED_ROUNDS"); do  # round 0 warms every proxy up (not counted)
    for n in "${names[@]}"; do
      PROXY_PID=${pid[$n]}; PROXY_PORT=${port[$n]}
      wrk_case "$n" 64 2 "$PAIRED_DUR" 0 1k.bin "paired c64 #$r"
    done
  done
  for n in "${names[@]}"; do
    rps=""; cpu=""
    for r in $(seq 1 "$PAIRED_ROUNDS"); do
      rps="$rps ${R["paired c64 #$r rps|$n"]:-}"; cpu="$cpu ${R["paired c64 #$r cpu µs/req|$n"]:-}"
    done
    R["paired c64 rps|$n"]=$(median $rps); R["paired c64 cpu µs/req|$n"]=$(median $cpu)
    PROXY_PID=${pid[$n]}; WATCH_PID=${watch[$n]}; stop_proxy
  done
}
paired_costs

# ---------------------------------------------------------------------------------------------------- report
METRICS=(
  "keep-alive 1 KiB c1 rps" "keep-alive 1 KiB c1 p50" "keep-alive 1 KiB c1 p99" "keep-alive 1 KiB c1 cpu µs/req"
  "keep-alive 1 KiB c64 rps" "keep-alive 1 KiB c64 p50" "keep-alive 1 KiB c64 p99" "keep-alive 1 KiB c64 cpu µs/req"
  "new conn/req 1 KiB c16 rps" "new conn/req 1 KiB c16 p50" "new conn/req 1 KiB c16 p99" "new conn/req 1 KiB c16 cpu µs/req"
  "keep-alive 64 KiB c16 MB/s" "keep-alive 64 KiB c16 cpu µs/req"
  "10 MiB transfer MB/s" "1 GiB first byte ms" "1 GiB transfer MB/s" "1 GiB RSS growth MiB" "idle RSS MiB"
)
ALL=(direct hookproxy hookproxy+har hookproxy+rules hookproxy+no-ui hookproxy+watched squid tinyproxy mitmdump)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "–"; else printf "%.3g×", a / b }'; }
MD="$ROOT/bench/results/latest.md"
mkdir -p "$ROOT/bench/results"
{
  echo "hookproxy bench, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), wrk ${DUR}s per keep-alive run"
  echo
  echo "Each cell: value · ratio to direct (d) · ratio to hookproxy (h). req/s and MB/s: higher is better; ms, µs, MiB: lower."
  echo
  hdr="| case |"; sep="| --- |"
  for p in "${ALL[@]}"; do hdr="$hdr $p |"; sep="$sep ---: |"; done
  echo "$hdr"; echo "$sep"
  for m in "${METRICS[@]}"; do
    row="| $m |"; any=""
    for p in "${ALL[@]}"; do
      v=${R["$m|$p"]:-}
      if [ -z "$v" ]; then row="$row |"; continue; fi
      any=1; cell=$v
      [ "$p" != direct ] && [ -n "${R["$m|direct"]:-}" ] && cell="$cell · $(ratio "$v" "${R["$m|direct"]}")d"
      [ "$p" != hookproxy ] && [ -n "${R["$m|hookproxy"]:-}" ] && cell="$cell · $(ratio "$v" "${R["$m|hookproxy"]}")h"
      row="$row $cell |"
    done
    [ -n "$any" ] && echo "$row"
  done
  errs=""
  for k in $(printf '%s\n' "${!R[@]}" | grep 'errors|' | sort | tr ' ' '~'); do
    k=${k//\~/ }; errs="$errs\n- ${k%%|*} (${k##*|}): ${R[$k]}"
  done
  [ -n "$errs" ] && printf '\nErrors:%b\n' "$errs"

  # Targets of issue 7, checked in this run.
  echo
  echo "| target (issue 7) | measured | met |"
  echo "| --- | --- | :-: |"
  check() { # description, measured text, awk condition on a b c
    local desc=$1 text=$2 cond=$3 a=${4:-} b=${5:-} c=${6:-} ok
    if [ -z "$a" ] || [ -z "$b" ]; then ok="n/a"
    else ok=$(awk -v a="$a" -v b="$b" -v c="$c" "BEGIN{ print (($cond) ? \"yes\" : \"**no**\") }"); fi
    echo "| $desc | $text | $ok |"
  }
  # A ratio target: "A vs B (A/B)", met when the awk condition on a (A) and b (B) holds.
  check_ratio() { check "$1" "$2 vs $3 ($(ratio "$2" "$3"))" "$4" "$2" "$3"; }
  k64="keep-alive 1 KiB c64"
  h=${R["$k64 rps|hookproxy"]:-}; s=${R["$k64 rps|squid"]:-}
  check "keep-alive 1 KiB c64: ≥ 1.5× squid req/s" "$h vs squid $s ($(ratio "$h" "$s"))" "a >= 1.5 * b" "$h" "$s"
  h=${R["$k64 cpu µs/req|hookproxy"]:-}
  check "keep-alive 1 KiB c64: proxy CPU ≤ 40 µs/req" "$h µs" "a <= 40" "$h" "40"
  d=${R["keep-alive 1 KiB c1 p50|direct"]:-}; h=${R["keep-alive 1 KiB c1 p50|hookproxy"]:-}; s=${R["keep-alive 1 KiB c1 p50|squid"]:-}
  if [ -n "$d" ] && [ -n "$h" ] && [ -n "$s" ]; then
    ha=$(awk -v a="$h" -v d="$d" 'BEGIN{printf "%.3f", a - d}'); sa=$(awk -v a="$s" -v d="$d" 'BEGIN{printf "%.3f", a - d}')
    check "added p50 at 1 connection ≤ squid's" "+$ha ms vs squid +$sa ms" "a <= b" "$ha" "$sa"
  else check "added p50 at 1 connection ≤ squid's" "–" "a <= b"; fi
  h=${R["new conn/req 1 KiB c16 rps|hookproxy"]:-}; s=${R["new conn/req 1 KiB c16 rps|squid"]:-}
  check "new connection per request: ≥ squid req/s" "$h vs squid $s ($(ratio "$h" "$s"))" "a >= b" "$h" "$s"
  h=${R["10 MiB transfer MB/s|hookproxy"]:-}; s=${R["10 MiB transfer MB/s|tinyproxy"]:-}
  check "10 MiB transfer: ≥ tinyproxy MB/s" "$h vs tinyproxy $s ($(ratio "$h" "$s"))" "a >= b" "$h" "$s"
  h=${R["1 GiB first byte ms|hookproxy"]:-}
  check "1 GiB: first byte < 50 ms" "$h ms" "a < 50" "$h" "50"
  h=${R["1 GiB RSS growth MiB|hookproxy"]:-}
  check "1 GiB: RSS growth < 32 MiB" "$h MiB" "a < 32" "$h" "32"
  h=${R["idle RSS MiB|hookproxy"]:-}; s=${R["idle RSS MiB|squid"]:-}
  check "idle RSS ≤ squid's" "$h MiB vs squid $s MiB" "a <= b" "$h" "$s"
  h=${R["$k64 rps|hookproxy"]:-}
  for v in har rules; do
    x=${R["$k64 rps|hookproxy+$v"]:-}
    check "hookproxy+$v keep-alive c64: ≥ 0.8× plain" "$x vs $h ($(ratio "$x" "$h"))" "a >= 0.8 * b" "$x" "$h"
  done
  # Issue 17: the traffic viewer (on by default) costs at most a tenth of --no-ui's throughput.
  x=${R["$k64 rps|hookproxy+no-ui"]:-}
  check "viewer on keep-alive c64: ≥ 0.9× --no-ui (sequential runs)" "$h vs $x ($(ratio "$h" "$x"))" "a >= 0.9 * b" "$h" "$x"
  w=${R["$k64 rps|hookproxy+watched"]:-}
  check "viewer watched (/api/events read) keep-alive c64: ≥ 0.9× --no-ui (sequential runs)" "$w vs $x ($(ratio "$w" "$x"))" "a >= 0.9 * b" "$w" "$x"
  x=${R["paired c64 rps|hookproxy+no-ui"]:-}
  if [ -n "$x" ]; then
    h=${R["paired c64 rps|hookproxy"]:-}; w=${R["paired c64 rps|hookproxy+watched"]:-}
    check "viewer on keep-alive c64: ≥ 0.9× --no-ui (paired, medians)" "$h vs $x ($(ratio "$h" "$x"))" "a >= 0.9 * b" "$h" "$x"
    check "viewer watched keep-alive c64: ≥ 0.9× --no-ui (paired, medians)" "$w vs $x ($(ratio "$w" "$x"))" "a >= 0.9 * b" "$w" "$x"
  fi

  # Issue 14's targets (it raised issue 7's), in this same run.
  echo
  echo "| target (issue 14) | measured | met |"
  echo "| --- | --- | :-: |"
  h=${R["$k64 rps|hookproxy"]:-}; s=${R["$k64 rps|squid"]:-}
  check_ratio "keep-alive 1 KiB c64: ≥ 2× squid req/s" "$h" "$s" "a >= 2 * b"
  h=${R["$k64 cpu µs/req|hookproxy"]:-}; s=${R["$k64 cpu µs/req|squid"]:-}
  check "keep-alive 1 KiB c64: proxy CPU per request ≤ 0.5× squid's" "$h vs squid $s µs ($(ratio "$h" "$s"))" "a <= 0.5 * b" "$h" "$s"
  h=${R["$k64 rps|hookproxy"]:-}
  x=${R["$k64 rps|hookproxy+har"]:-}
  check_ratio "--har ≥ 0.8× plain (sequential runs)" "$x" "$h" "a >= 0.8 * b"
  x=${R["$k64 rps|hookproxy+rules"]:-}
  check_ratio "50 rules ≥ 0.9× plain (sequential runs)" "$x" "$h" "a >= 0.9 * b"
  p=${R["paired c64 rps|hookproxy"]:-}
  if [ -n "$p" ]; then
    x=${R["paired c64 rps|hookproxy+har"]:-}
    check_ratio "--har ≥ 0.8× plain (paired, medians)" "$x" "$p" "a >= 0.8 * b"
    x=${R["paired c64 rps|hookproxy+rules"]:-}
    check_ratio "50 rules ≥ 0.9× plain (paired, medians)" "$x" "$p" "a >= 0.9 * b"
    a=${R["paired c64 cpu µs/req|hookproxy+har"]:-}; b=${R["paired c64 cpu µs/req|hookproxy"]:-}
    if [ -n "$a" ] && [ -n "$b" ]; then
      d=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.1f", a - b}')
      check "log path (--har CPU − plain CPU per request, paired) ≤ 15 µs" "$d µs ($a − $b)" "a <= 15" "$d" "15"
    fi
  fi
  h=${R["new conn/req 1 KiB c16 rps|hookproxy"]:-}; s=${R["new conn/req 1 KiB c16 rps|squid"]:-}
  check_ratio "new connection per request ≥ 1.5× squid req/s" "$h" "$s" "a >= 1.5 * b"
  h=${R["idle RSS MiB|hookproxy"]:-}; s=${R["idle RSS MiB|squid"]:-}
  check "idle RSS ≤ squid's" "$h MiB vs squid $s MiB" "a <= b" "$h" "$s"
  h=${R["10 MiB transfer MB/s|hookproxy"]:-}; s=${R["10 MiB transfer MB/s|tinyproxy"]:-}
  check_ratio "10 MiB transfer ≥ 3× tinyproxy MB/s" "$h" "$s" "a >= 3 * b"
  h=${R["1 GiB first byte ms|hookproxy"]:-}
  check "1 GiB: first byte < 50 ms" "$h ms" "a < 50" "$h" "50"

  if [ -n "${R["paired c64 rps|hookproxy"]:-}" ]; then
    b=${R["paired c64 rps|hookproxy"]:-}; bc=${R["paired c64 cpu µs/req|hookproxy"]:-}
    echo
    echo "Costs, paired: $PAIRED_ROUNDS rounds of one ${PAIRED_DUR} s keep-alive 1 KiB c64 run per proxy, taking turns (medians):"
    echo
    echo "| proxy | req/s | ÷ hookproxy | proxy CPU µs/req | ÷ hookproxy |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for n in hookproxy hookproxy+no-ui hookproxy+watched hookproxy+har hookproxy+rules; do
      v=${R["paired c64 rps|$n"]:-}; [ -n "$v" ] || continue
      c=${R["paired c64 cpu µs/req|$n"]:-}
      echo "| $n | $v | $(ratio "$v" "$b") | $c | $(ratio "$c" "$bc") |"
    done
  fi
} >"$MD"
echo
cat "$MD"
echo
echo "(written to ${MD#"$ROOT"/})"
