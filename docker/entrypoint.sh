#!/bin/sh
# hookproxy's container entrypoint. It stands for `hookproxy`:
#   (no arguments) | run [FLAGS...] | -FLAG...   -> hookproxy run with the container's defaults, then FLAGS
#   check ... | pin ... | ca ... | help ...       -> hookproxy with those arguments, unchanged
#
# The default run listens on 0.0.0.0:8080, reads rules from /rules, keeps the CA in /data/ca and writes a HAR to
# /data/logs/hookproxy.har. Proxy credentials come from HOOKPROXY_PROXY_AUTH (USER:PASS) because hookproxy reads
# them only from its --proxy-auth flag. Without them the container refuses to start, unless
# HOOKPROXY_ALLOW_OPEN_PROXY=1 says that an open proxy is really wanted.
set -eu

if [ "$#" -eq 0 ]; then
    set -- run
fi
case "$1" in
    run) shift ;;
    -*) ;;
    *) exec hookproxy "$@" ;;
esac

auth="${HOOKPROXY_PROXY_AUTH:-}"
if [ -z "$auth" ]; then
    if [ "${HOOKPROXY_ALLOW_OPEN_PROXY:-}" != "1" ]; then
        cat >&2 <<'EOF'
hookproxy: refusing to start: HOOKPROXY_PROXY_AUTH is not set.
In this container hookproxy listens on 0.0.0.0:8080. Without proxy credentials, anyone who can reach that port
could use it as an open proxy: to reach hosts inside your network, or to send traffic that looks like yours.
  - set HOOKPROXY_PROXY_AUTH=USER:PASS and point clients at http://USER:PASS@HOST:8080, or
  - set HOOKPROXY_ALLOW_OPEN_PROXY=1 if only you can reach the port (e.g. it is published on 127.0.0.1 only).
EOF
        exit 1
    fi
    echo "hookproxy: warning: HOOKPROXY_ALLOW_OPEN_PROXY=1 and no HOOKPROXY_PROXY_AUTH: this is an open proxy on port 8080." >&2
    set -- --listen 0.0.0.0:8080 --rules /rules --ca-dir /data/ca --har /data/logs/hookproxy.har "$@"
else
    case "$auth" in
        ?*:*) ;;
        *)
            echo "hookproxy: refusing to start: HOOKPROXY_PROXY_AUTH must read USER:PASS (a user name, a colon, a password)." >&2
            exit 1
            ;;
    esac
    set -- --listen 0.0.0.0:8080 --rules /rules --ca-dir /data/ca --har /data/logs/hookproxy.har \
        --proxy-auth "$auth" "$@"
fi

# /data may be a bind mount owned by someone else: say so plainly instead of failing later inside hookproxy.
for dir in /data/ca /data/logs; do
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
        echo "hookproxy: refusing to start: $dir is not writable by uid $(id -u). Mount a named volume at /data, or make the mounted directory writable by uid $(id -u)." >&2
        exit 1
    fi
done

exec hookproxy run "$@"
