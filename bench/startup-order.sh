#!/usr/bin/env bash
# Writes linker/startup.order: the functions of hookproxy's binary that run while it starts and sits idle, then
# those a first few requests add, in that order. `make build` (SWIFT_BUILD_FLAGS) compiles every function into a
# section of its own and has lld lay the binary's code out in this order, so what start-up touches is a few
# contiguous megabytes, not pages all over 10 MiB of code (each page fault maps 64 KiB around it): idle RSS
# about −5 MiB (bench/README.md, "Session 15").
#
#   bash bench/startup-order.sh                 (or: make startup-order)   a release binary built by make build
#   HOOKPROXY=/path/hookproxy bash bench/startup-order.sh                   a given binary
#
# Run it again after changes that move start-up work around; a name the binary no longer has is skipped by the
# linker, so a stale list costs memory, never a build. It runs hookproxy under valgrind --tool=callgrind twice (no
# rules; the example rules with a HAR and a JSONL log), with dumps once it is idle, after a first request and after
# a few more (GET, POST, keep-alive and not) to a local Python upstream. Each group of new functions is sorted by
# name, so a module's functions sit together: what one configuration does not run stays out of its pages.
# Needs valgrind, objcopy, cc, curl, python3.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PATH="$PATH:/usr/sbin:/sbin"
for t in valgrind callgrind_control objcopy "${CC:-cc}" curl python3; do
  command -v "$t" >/dev/null || { echo "$t is not installed (apt-get install valgrind binutils gcc curl python3)" >&2; exit 1; }
done
[ -n "${HOOKPROXY:-}" ] || HOOKPROXY=$(bash "$ROOT/bench/build-release.sh")
HOOKPROXY=$(realpath "$HOOKPROXY")
OUT="$ROOT/linker/startup.order"

T=$(mktemp -d /tmp/hookproxy-order.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

source "$ROOT/bench/valgrind-copy.sh"
valgrind_copy "$HOOKPROXY" "$T"
mkdir -p "$T/www" "$T/home" "$T/no-rules"
head -c 1024 /dev/urandom >"$T/www/1k.bin"
UP=$(free_port)
python3 -m http.server "$UP" --bind 127.0.0.1 --directory "$T/www" >/dev/null 2>&1 & PIDS+=($!)
URL="http://127.0.0.1:$UP/1k.bin"

# profile NAME ARGS...: hookproxy under callgrind with ARGS; a dump once it is idle (NAME.idle), one after a first
# request (NAME.first), and the rest at exit (NAME.rest), after a few more requests of each kind.
profile() {
  local name=$1 hp pid; shift
  hp=$(free_port)
  (HOME="$T/home" GNUTLS_NO_IMPLICIT_INIT=1 LD_PRELOAD="$T/sigsuspend-copy.so" exec valgrind --tool=callgrind --demangle=no --dump-instr=no \
    --callgrind-out-file="$T/$name" "$T/hookproxy" run --listen "127.0.0.1:$hp" --quiet "$@") >"$T/$name.log" 2>&1 &
  pid=$!; PIDS+=("$pid")
  for _ in $(seq 1 600); do
    grep -q 'listening on' "$T/$name.log" && break
    kill -0 "$pid" 2>/dev/null || break; sleep 0.1
  done
  grep -q 'listening on' "$T/$name.log" || { tail -20 "$T/$name.log" >&2; echo "hookproxy did not start ($name)" >&2; exit 1; }
  settle "$pid"
  dump "$pid" "$T/$name" idle
  curl -sf -o /dev/null --max-time 30 -x "http://127.0.0.1:$hp" "$URL"
  dump "$pid" "$T/$name" first
  for _ in 1 2 3; do
    curl -sf -o /dev/null -o /dev/null -o /dev/null --max-time 30 -x "http://127.0.0.1:$hp" "$URL" "$URL" "$URL"
    curl -sf -o /dev/null --max-time 30 -x "http://127.0.0.1:$hp" -H 'Connection: close' "$URL"
    curl -s -o /dev/null --max-time 30 -x "http://127.0.0.1:$hp" -d 'a=1' "$URL" || true
  done
  kill -TERM "$pid"
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  mv "$T/$name" "$T/$name.rest"
}
settle() { # PID: waits (up to 60 s) until the process has used no CPU for 2 s: start-up under valgrind goes on
  # well after the listening line (the CA, the viewer, the loops), and what it runs then belongs to the idle group
  local last="" now quiet=0
  for _ in $(seq 1 120); do
    now=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo gone)
    if [ "$now" = "$last" ]; then quiet=$((quiet + 1)); [ "$quiet" -ge 4 ] && return 0; else quiet=0; fi
    last=$now; sleep 0.5
  done
}
dump() { # PID FILE LABEL: a callgrind dump, renamed FILE.LABEL
  local dumps
  callgrind_control -d "$3" "$1" >/dev/null 2>&1
  for _ in $(seq 1 100); do dumps=$(compgen -G "$2.[0-9]*" || true); [ -n "$dumps" ] && break; sleep 0.1; done
  [ -n "$dumps" ] || { echo "no callgrind dump for $3" >&2; exit 1; }
  sleep 0.5
  mv "$dumps" "$2.$3"
}
# The bench's idle figure is hookproxy with no rules after one request (bench/run.sh); `make run` starts it with
# the example rules; logs add their own start-up. A CA exists, as it does after a first use (it is loaded at start).
"$T/hookproxy" ca path --ca-dir "$T/home/.hookproxy" >/dev/null
profile plain --rules "$T/no-rules"
profile full --rules "$ROOT/rules" --har "$T/log.har" --jsonl "$T/log.jsonl"

python3 - "$T" "$OUT" <<'PYEOF'
import re, sys
tmp, out = sys.argv[1], sys.argv[2]

def functions(path):
    """The functions of the hookproxy object a callgrind dump (compressed names) ran."""
    objects, names, found, current = {}, {}, set(), None
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, key, name = m.groups()
            if name: objects[key] = name
            if kind == "ob": current = objects.get(key, "")
            continue
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, key, name = m.groups()
            if name: names[key] = name
            fn = names.get(key)
            if kind == "fn" and current and current.endswith("/hookproxy") and fn and not fn.startswith("0x"):
                found.add(fn)
    return found

# Groups in the order they are first needed; inside each, by name, which keeps a module's functions together.
groups = [("idle, no rules", "plain.idle"), ("its first request", "plain.first"),
          ("idle with the example rules and logs", "full.idle"), ("more requests", "plain.rest"),
          ("more requests with rules and logs", "full.first"), ("", "full.rest")]
seen, lines = set(), []
for label, dump in groups:
    new = sorted(functions(f"{tmp}/{dump}") - seen)
    seen |= set(new)
    lines += new
    if label: print(f"{len(new):6d} functions: {label}", file=sys.stderr)
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{out}: {len(lines)} functions", file=sys.stderr)
PYEOF
